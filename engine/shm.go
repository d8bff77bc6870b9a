package engine

import (
	"encoding/binary"
	"fmt"
	"os"
	"unsafe"

	"github.com/tachyon-hpc/tachyon/asm"
	"github.com/tachyon-hpc/tachyon/progress"
	"github.com/tachyon-hpc/tachyon/rings"
)

// A shared-memory job is one segment (see rings.Segment) that every rank
// process maps:
//
//	region 0        control: line 0 {magic u32, ranks u32}, then two
//	                lines per rank: its doorbell, and {pid u64,
//	                attached u32}
//	region 1+i*n+j  the ring carrying rank i's packets to rank j: a
//	                record ring or a cell ring (engine_rings, as the
//	                creator had it)
//
// Each rank parks on its own doorbell; a sender rings the receiver's after
// publishing. Rendezvous messages are read with process_vm_readv from the
// sender's buffer where the kernel allows it, else streamed through the
// rings.

const (
	shmMagic     = 0x4d485354 // "TSHM"
	ctlLine      = 64
	ctlPerRank   = 2 * ctlLine
	offCtlPID    = ctlLine // within a rank's lines
	offCtlJoined = ctlLine + 8
)

func ctlSize(n int) int { return ctlLine + n*ctlPerRank }

// ShmJobSize returns the bytes the segment of an n-rank job takes with the
// current engine_rings and ring geometry.
func ShmJobSize(n int) (int, error) {
	size, err := pairRingSize()
	if err != nil {
		return 0, err
	}
	regions := []int{ctlSize(n)}
	for i := 0; i < n*n; i++ {
		regions = append(regions, size)
	}
	return rings.SegmentSize(regions...), nil
}

// CreateShmJob creates the segment of an n-rank job: a named one under
// rings_shm_dir if name is not empty, else an unnamed memfd to hand to
// children. The creator passes it to the ranks, which call OpenShm.
func CreateShmJob(name string, n int) (*rings.Segment, error) {
	if n < 1 || n > 1<<12 {
		return nil, fmt.Errorf("%w: %d ranks", ErrConfig, n)
	}
	total, err := ShmJobSize(n)
	if err != nil {
		return nil, err
	}
	var seg *rings.Segment
	if name != "" {
		seg, err = rings.CreateSegment(name, total)
	} else {
		seg, err = rings.CreateMemfdSegment("tachyon-job", total)
	}
	if err != nil {
		return nil, err
	}
	_, ctl, err := seg.NewRegion(ctlSize(n))
	for i := 0; i < n*n && err == nil; i++ {
		err = newSegPairRing(seg)
	}
	if err != nil {
		seg.Remove()
		seg.Close()
		return nil, err
	}
	binary.LittleEndian.PutUint32(ctl[4:], uint32(n))
	asm.StoreRelease32((*uint32)(unsafe.Pointer(&ctl[0])), shmMagic)
	return seg, nil
}

// shmJob is one rank's view of the control region.
type shmJob struct {
	ctl []byte
	n   int
}

func (j shmJob) rankLines(i int) []byte {
	return j.ctl[ctlLine+i*ctlPerRank : ctlLine+(i+1)*ctlPerRank]
}

func (j shmJob) pid(i int) int {
	return int(asm.LoadAcquire64((*uint64)(unsafe.Pointer(&j.rankLines(i)[offCtlPID]))))
}

// newSegPairRing carves the next pair's ring out of seg.
func newSegPairRing(seg *rings.Segment) error {
	if ringKind.Get() == ringsCells {
		cells, size, err := ringGeometry()
		if err == nil {
			_, _, err = seg.NewCellRing(cells, size)
		}
		return err
	}
	_, _, err := seg.NewRecordRing(int(ringBytes.Get()))
	return err
}

// openPairRing attaches to the pair ring in region i of seg, of whichever
// kind its creator made.
func openPairRing(seg *rings.Segment, i int) (pairRing, error) {
	if r, err := seg.RecordRing(i); err == nil {
		return pairRing{record: r}, nil
	}
	r, err := seg.CellRing(i)
	return pairRing{cell: r}, err
}

// OpenShm attaches rank to the job in seg and returns its endpoint. The
// segment must stay open while the endpoint is in use.
func OpenShm(seg *rings.Segment, rank int) (*Endpoint, error) {
	ctl, err := seg.Region(0)
	if err != nil {
		return nil, err
	}
	if len(ctl) < ctlLine || asm.LoadAcquire32((*uint32)(unsafe.Pointer(&ctl[0]))) != shmMagic {
		return nil, fmt.Errorf("%w: segment %q holds no shared-memory job", ErrConfig, seg.Name())
	}
	n := int(binary.LittleEndian.Uint32(ctl[4:]))
	if n < 1 || len(ctl) < ctlSize(n) || seg.Regions() != 1+n*n {
		return nil, fmt.Errorf("%w: segment %q: job of %d ranks does not fit its %d regions", ErrConfig, seg.Name(), n, seg.Regions())
	}
	if rank < 0 || rank >= n {
		return nil, fmt.Errorf("%w: rank %d of a %d-rank job", ErrConfig, rank, n)
	}
	job := shmJob{ctl: ctl, n: n}
	bells := make([]*progress.Doorbell, n)
	for i := range bells {
		if bells[i], err = progress.DoorbellAt(job.rankLines(i)[:ctlLine]); err != nil {
			return nil, err
		}
	}
	mine := job.rankLines(rank)
	if asm.LoadAcquire32((*uint32)(unsafe.Pointer(&mine[offCtlJoined]))) != 0 {
		return nil, fmt.Errorf("%w: rank %d of segment %q is already attached", ErrConfig, rank, seg.Name())
	}
	prog, err := progress.New(progress.WithDoorbell(bells[rank]))
	if err != nil {
		return nil, err
	}
	links := make([]Link, n)
	inboxes := make([]Inbox, n)
	counts := make([]transportCounters, n)
	var closers []func()
	fail := func(err error) (*Endpoint, error) {
		for _, c := range closers {
			c()
		}
		prog.Close()
		return nil, err
	}
	for j := 0; j < n; j++ {
		out, err := openPairRing(seg, 1+rank*n+j)
		if err != nil {
			return fail(err)
		}
		bell := bells[j]
		counts[j] = countShm
		if j == rank {
			bell = nil
			counts[j] = countSelf
		}
		l, lc, err := out.link(bell)
		if err != nil {
			return fail(fmt.Errorf("rank %d: sending side of ring to rank %d: %w", rank, j, err))
		}
		closers = append(closers, lc.close)
		in, err := openPairRing(seg, 1+j*n+rank)
		if err != nil {
			return fail(err)
		}
		c, ic, err := in.inbox()
		if err != nil {
			return fail(fmt.Errorf("rank %d: receiving side of ring from rank %d: %w", rank, j, err))
		}
		closers = append(closers, ic.close)
		links[j], inboxes[j] = l, c
	}
	rd := &shmReader{job: job, self: rank}
	ep, err := newEndpoint(rank, links, inboxes, counts, prog, rd)
	if err != nil {
		return fail(err)
	}
	rd.ep = ep
	asm.StoreRelease64((*uint64)(unsafe.Pointer(&mine[offCtlPID])), uint64(os.Getpid()))
	asm.StoreRelease32((*uint32)(unsafe.Pointer(&mine[offCtlJoined])), 1)
	ep.onClose = append(ep.onClose, func() {
		for _, c := range closers {
			c()
		}
		asm.Fence() // Wake's contract
		for _, l := range links {
			l.Wake()
		}
		prog.Close()
	})
	return ep, nil
}

// shmReader reads rendezvous data from another rank process's buffer.
type shmReader struct {
	job      shmJob
	self     int
	ep       *Endpoint
	disabled bool // the kernel refused cross-memory attach once
}

func (r *shmReader) readRemote(peer int, sreq, addr uint64, dst []byte) error {
	if peer == r.self {
		s := r.ep.reqs.peerLookup(sreq)
		if s == nil {
			return fmt.Errorf("%w: no send request %#x", ErrMalformed, sreq)
		}
		copy(dst, s.buf)
		return nil
	}
	switch mode := rndvMode.Get(); {
	case r.disabled || mode == "pipeline":
		return errCMAOff
	case mode == "auto" && len(dst) < int(cmaMin.Get()):
		return errCMASmall
	}
	if len(dst) == 0 {
		return nil
	}
	err := readProcess(r.job.pid(peer), addr, dst)
	if err == nil {
		pvCMA.Add(1)
		return nil
	}
	if isPermission(err) {
		r.disabled = true
	}
	return err
}
