package engine

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"sync/atomic"
	"syscall"
	"unsafe"

	"github.com/tachyon-hpc/tachyon/asm"
	"github.com/tachyon-hpc/tachyon/progress"
	"github.com/tachyon-hpc/tachyon/rings"
)

// A shared-memory job is one segment (see rings.Segment) that every rank
// process maps, with two regions:
//
//	region 0  control: line 0 {magic u32, ranks u32, ring bytes u64,
//	          abort u64, clock base u64, clock counts a second f64},
//	          then two lines per rank: its doorbell, and {pid u64,
//	          attached u32}; abort is 0, or the first Endpoint.Abort's
//	          1<<63 | rank<<32 | code, for the launcher; the clock is the
//	          creator's (progress.SharedClock; 0 if it has none), which
//	          the ranks start theirs as, so that Wtime is one clock
//	region 1  the pair rings, ranks² of ring bytes each (a multiple of a
//	          cache line): ring i*n+j carries rank i's packets to rank j,
//	          a record ring or a cell ring (engine_rings, as the creator
//	          had it), each with its own validated header
//	region 2  the host's collective areas (hostcoll.go): areas u32,
//	          slots u32 and slot bytes u32 at 40, 44 and 48 of line 0 give
//	          their geometry, the creator's engine_coll_shm_* (no area: a
//	          line of nothing)
//
// Each rank parks on its own doorbell; a sender rings the receiver's after
// publishing. Rendezvous messages are read with process_vm_readv from the
// sender's buffer where the kernel allows it, else streamed through the
// rings.

const (
	shmMagic     = 0x33485354 // "TSH3": three regions ("TSH2" had no collective areas; the first layout, "TSHM", a region per ring)
	shmMagicV2   = 0x32485354
	shmMagicV1   = 0x4d485354
	ctlLine      = 64
	ctlPerRank   = 2 * ctlLine
	offCtlMagic  = 0       // within line 0: shmMagic, stored last
	offCtlRanks  = 4       // within line 0: ranks u32
	offCtlRing   = 8       // within line 0: ring bytes
	offCtlAbort  = 16      // within line 0: the job's abort
	offCtlClock  = 24      // within line 0: the creator's clock base u64
	offCtlHz     = 32      // within line 0: the creator's clock frequency, float64
	offCtlAreas  = 40      // within line 0: collective areas u32
	offCtlSlots  = 44      // within line 0: slots per rank of an area u32
	offCtlSlotB  = 48      // within line 0: bytes of a data slot u32
	offCtlLines  = 52      // within line 0: flag lines per rank of an area u32
	offCtlPID    = ctlLine // within a rank's lines
	offCtlJoined = ctlLine + 8
	maxShmRanks  = 1 << 12
)

func ctlSize(n int) int { return ctlLine + n*ctlPerRank }

// pairStride returns the bytes each pair ring takes in region 1 with the
// current engine_rings and ring geometry.
func pairStride() (int, error) {
	size, err := pairRingSize()
	if err != nil {
		return 0, err
	}
	return (size + rings.CacheLine - 1) &^ (rings.CacheLine - 1), nil
}

// ShmJobSize returns the bytes the segment of an n-rank job takes with the
// current engine_rings and ring geometry.
func ShmJobSize(n int) (int, error) {
	stride, err := pairStride()
	if err != nil {
		return 0, err
	}
	if n < 1 || n > maxShmRanks {
		return 0, fmt.Errorf("%w: %d ranks", ErrConfig, n)
	}
	return rings.SegmentSize(ctlSize(n), n*n*stride, currentCollGeom(n).size()), nil
}

// Segment is the shared memory of a host's ranks of a job: created by
// CreateShmJob, opened by OpenShmSegment, attached to by OpenShm.
type Segment = rings.Segment

// OpenShmSegment opens the segment another process created with
// CreateShmJob(name, n).
func OpenShmSegment(name string) (*Segment, error) { return rings.OpenSegment(name) }

// RemoveStaleShmJobs removes the named segments whose names start with
// prefix and that no live process holds: the leftovers of jobs whose
// creator died before it removed the name. It returns how many it removed.
func RemoveStaleShmJobs(prefix string) (int, error) { return rings.RemoveStale(prefix) }

// OpenShmJob opens the segment name and attaches rank to it (OpenShm),
// its progress engine made with opts; the endpoint owns the segment and
// closes it when it closes.
func OpenShmJob(name string, rank int, opts ...progress.Option) (*Endpoint, error) {
	seg, err := OpenShmSegment(name)
	if err != nil {
		return nil, fmt.Errorf("opening the job's segment: %w", err)
	}
	ep, err := openShm(seg, rank, opts)
	if err != nil {
		seg.Close()
		return nil, err
	}
	ep.onClose = append(ep.onClose, func() { seg.Close() })
	return ep, nil
}

// CreateShmJob creates the segment of an n-rank job: a named one under
// rings_shm_dir if name is not empty, else an unnamed memfd to hand to
// children. The creator passes it to the ranks, which call OpenShm.
func CreateShmJob(name string, n int) (*Segment, error) {
	total, err := ShmJobSize(n)
	if err != nil {
		return nil, err
	}
	stride, _ := pairStride()
	var seg *rings.Segment
	if name != "" {
		seg, err = rings.CreateSegment(name, total)
	} else {
		seg, err = rings.CreateMemfdSegment("tachyon-job", total)
	}
	if err != nil {
		hint := ""
		if errors.Is(err, syscall.ENOSPC) {
			hint = " (lower engine_ring_bytes with TACHYON_ENGINE_RING_BYTES, or give rings_shm_dir more room)"
		}
		return nil, fmt.Errorf("%d ranks need %d bytes of shared memory, %d rings of %d bytes: %w%s", n, total, n*n, stride, err, hint)
	}
	geom := currentCollGeom(n)
	_, ctl, err := seg.NewRegion(ctlSize(n))
	var all []byte
	if err == nil {
		_, all, err = seg.NewRegion(n * n * stride)
	}
	if err == nil {
		_, _, err = seg.NewRegion(geom.size())
	}
	for k := 0; k < n*n && err == nil; k++ {
		_, err = newPairRing(all[k*stride : (k+1)*stride])
	}
	if err != nil {
		seg.Remove()
		seg.Close()
		return nil, err
	}
	binary.LittleEndian.PutUint32(ctl[offCtlRanks:], uint32(n))
	binary.LittleEndian.PutUint64(ctl[offCtlRing:], uint64(stride))
	binary.LittleEndian.PutUint32(ctl[offCtlAreas:], uint32(geom.areas))
	binary.LittleEndian.PutUint32(ctl[offCtlSlots:], uint32(geom.slots))
	binary.LittleEndian.PutUint32(ctl[offCtlSlotB:], uint32(geom.slotBytes))
	binary.LittleEndian.PutUint32(ctl[offCtlLines:], uint32(geom.lines))
	if base, hz, ok := progress.SharedClock(); ok {
		binary.LittleEndian.PutUint64(ctl[offCtlClock:], base)
		binary.LittleEndian.PutUint64(ctl[offCtlHz:], math.Float64bits(hz))
	}
	asm.StoreRelease32((*uint32)(unsafe.Pointer(&ctl[offCtlMagic])), shmMagic)
	return seg, nil
}

// shmJob is one rank's view of the job's regions.
type shmJob struct {
	ctl    []byte
	rings  []byte
	coll   []byte // the collective areas
	geom   collGeom
	n      int
	stride int
}

func (j shmJob) rankLines(i int) []byte {
	return j.ctl[ctlLine+i*ctlPerRank : ctlLine+(i+1)*ctlPerRank]
}

func (j shmJob) pid(i int) int {
	return int(asm.LoadAcquire64((*uint64)(unsafe.Pointer(&j.rankLines(i)[offCtlPID]))))
}

// markAborted records that rank aborted the job with code, unless a rank
// did first.
func (j shmJob) markAborted(rank, code int) {
	w := (*uint64)(unsafe.Pointer(&j.ctl[offCtlAbort]))
	atomic.CompareAndSwapUint64(w, 0, 1<<63|uint64(uint32(rank))<<32|uint64(uint32(int32(code))))
}

// ShmJobAborted reports whether a rank of the job in seg called Abort,
// which one and with what code. A launcher reads it when a rank exits,
// so that an abort ends the job whatever its code, 0 included.
func ShmJobAborted(seg *rings.Segment) (rank, code int, ok bool) {
	j, err := openShmJob(seg)
	if err != nil {
		return 0, 0, false
	}
	v := atomic.LoadUint64((*uint64)(unsafe.Pointer(&j.ctl[offCtlAbort])))
	if v == 0 {
		return 0, 0, false
	}
	return int(v >> 32 & 0x7fffffff), int(int32(uint32(v))), true
}

// ringMem returns the memory of the ring from rank i to rank k.
func (j shmJob) ringMem(i, k int) []byte {
	off := (i*j.n + k) * j.stride
	return j.rings[off : off+j.stride : off+j.stride]
}

// openShmJob validates the job in seg and returns its regions.
func openShmJob(seg *rings.Segment) (shmJob, error) {
	ctl, err := seg.Region(0)
	if err != nil {
		return shmJob{}, err
	}
	if len(ctl) < ctlLine {
		return shmJob{}, fmt.Errorf("%w: segment %q holds no shared-memory job", ErrConfig, seg.Name())
	}
	switch asm.LoadAcquire32((*uint32)(unsafe.Pointer(&ctl[offCtlMagic]))) {
	case shmMagic:
	case shmMagicV1, shmMagicV2:
		return shmJob{}, fmt.Errorf("%w: segment %q holds a job laid out by an older Tachyon: launch with a tachyonrun of the same version", ErrConfig, seg.Name())
	default:
		return shmJob{}, fmt.Errorf("%w: segment %q holds no shared-memory job", ErrConfig, seg.Name())
	}
	n := int(binary.LittleEndian.Uint32(ctl[offCtlRanks:]))
	stride := binary.LittleEndian.Uint64(ctl[offCtlRing:])
	if n < 1 || n > maxShmRanks || len(ctl) < ctlSize(n) || seg.Regions() != 3 {
		return shmJob{}, fmt.Errorf("%w: segment %q: a job of %d ranks in %d regions", ErrConfig, seg.Name(), n, seg.Regions())
	}
	all, err := seg.Region(1)
	if err != nil {
		return shmJob{}, err
	}
	if stride == 0 || stride%rings.CacheLine != 0 || stride > uint64(len(all)) || uint64(len(all))/stride < uint64(n*n) {
		return shmJob{}, fmt.Errorf("%w: segment %q: %d-byte rings for %d ranks in a %d-byte region", ErrConfig, seg.Name(), stride, n, len(all))
	}
	coll, err := seg.Region(2)
	if err != nil {
		return shmJob{}, err
	}
	geom := collGeom{areas: int(binary.LittleEndian.Uint32(ctl[offCtlAreas:])), ranks: n,
		slots: int(binary.LittleEndian.Uint32(ctl[offCtlSlots:])), slotBytes: int(binary.LittleEndian.Uint32(ctl[offCtlSlotB:])),
		lines: int(binary.LittleEndian.Uint32(ctl[offCtlLines:]))}
	if geom.areas != 0 && !geom.valid(len(coll)) {
		return shmJob{}, fmt.Errorf("%w: segment %q: %d collective areas of %d lines and %d slots of %d bytes for %d ranks in a %d-byte region", ErrConfig, seg.Name(), geom.areas, geom.lines, geom.slots, geom.slotBytes, n, len(coll))
	}
	return shmJob{ctl: ctl, rings: all, coll: coll, geom: geom, n: n, stride: int(stride)}, nil
}

// openPairRing attaches to the pair ring in mem, of whichever kind its
// creator made.
func openPairRing(mem []byte) (pairRing, error) {
	if r, err := rings.AttachRecordRing(mem); err == nil {
		return pairRing{record: r}, nil
	}
	r, err := rings.AttachCellRing(mem)
	return pairRing{cell: r}, err
}

// OpenShm attaches rank to the job in seg and returns its endpoint. The
// segment must stay open while the endpoint is in use.
func OpenShm(seg *Segment, rank int) (*Endpoint, error) {
	return openShm(seg, rank, nil)
}

// openShm is OpenShm with options for the progress engine.
func openShm(seg *Segment, rank int, opts []progress.Option) (*Endpoint, error) {
	a, err := attachShm(seg, rank, opts)
	if err != nil {
		return nil, err
	}
	rd := &shmReader{job: a.job, self: rank}
	ep, err := newEndpoint(rank, a.links, a.inboxes, a.counts, a.prog, rd)
	if err != nil {
		a.close()
		return nil, err
	}
	rd.ep = ep
	host := a.hostColl(nil, a.job.n)
	ep.hostColl = func() *HostColl { return host }
	a.joined()
	ep.onAbort = func(code int) { a.job.markAborted(rank, code) }
	ep.onClose = append(ep.onClose, a.close)
	return ep, nil
}

// shmSide is one rank's side of a shared-memory job: its links to and
// inboxes from every rank of the segment (by the segment's rank, its
// own included) and its progress engine, parked on its doorbell in the
// segment.
type shmSide struct {
	job     shmJob
	rank    int
	prog    *progress.Engine
	links   []Link
	inboxes []Inbox
	counts  []transportCounters
	closers []func()
}

// attachShm attaches rank of the job in seg to the rings it sends and
// receives on.
func attachShm(seg *rings.Segment, rank int, opts []progress.Option) (*shmSide, error) {
	job, err := openShmJob(seg)
	if err != nil {
		return nil, err
	}
	n := job.n
	if rank < 0 || rank >= n {
		return nil, fmt.Errorf("%w: rank %d of a %d-rank job", ErrConfig, rank, n)
	}
	// Start this process's clock as the creator's, if it has not started
	// (progress.StartSharedClock): every rank's Wtime is then one clock.
	if base := binary.LittleEndian.Uint64(job.ctl[offCtlClock:]); base != 0 {
		progress.StartSharedClock(base, math.Float64frombits(binary.LittleEndian.Uint64(job.ctl[offCtlHz:])))
	}
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
	prog, err := progress.New(append([]progress.Option{progress.WithDoorbell(bells[rank]), oversubscribed(n)}, opts...)...)
	if err != nil {
		return nil, err
	}
	a := &shmSide{job: job, rank: rank, prog: prog,
		links: make([]Link, n), inboxes: make([]Inbox, n), counts: make([]transportCounters, n)}
	fail := func(err error) (*shmSide, error) {
		for _, c := range a.closers {
			c()
		}
		prog.Close()
		return nil, err
	}
	for j := 0; j < n; j++ {
		out, err := openPairRing(job.ringMem(rank, j))
		if err != nil {
			return fail(err)
		}
		bell := bells[j]
		a.counts[j] = countShm
		if j == rank {
			bell = nil
			a.counts[j] = countSelf
		}
		l, lc, err := out.link(bell)
		if err != nil {
			return fail(fmt.Errorf("rank %d: sending side of ring to rank %d: %w", rank, j, err))
		}
		a.closers = append(a.closers, lc.close)
		in, err := openPairRing(job.ringMem(j, rank))
		if err != nil {
			return fail(err)
		}
		c, ic, err := in.inbox()
		if err != nil {
			return fail(fmt.Errorf("rank %d: receiving side of ring from rank %d: %w", rank, j, err))
		}
		a.closers = append(a.closers, ic.close)
		a.links[j], a.inboxes[j] = l, c
	}
	if prefault.Get() {
		// A hint: a ring that fails to prefault faults in as touched.
		for j := 0; j < n; j++ {
			rings.Prefault(job.ringMem(rank, j))
			rings.Prefault(job.ringMem(j, rank))
		}
	}
	return a, nil
}

// hostColl returns the segment's collective areas for the host's ranks,
// world ranks ranks of a job of size ranks (nil: the segment's ranks are
// the world).
func (a *shmSide) hostColl(ranks []int, size int) *HostColl {
	if ranks == nil {
		ranks = make([]int, a.job.n)
		for i := range ranks {
			ranks[i] = i
		}
	}
	return newHostColl(a.job.coll, a.job.geom, ranks, size)
}

// joined marks the rank attached in the segment, with its pid, which
// the other ranks' dead-peer checks and cross-memory copies read.
func (a *shmSide) joined() {
	mine := a.job.rankLines(a.rank)
	asm.StoreRelease64((*uint64)(unsafe.Pointer(&mine[offCtlPID])), uint64(os.Getpid()))
	asm.StoreRelease32((*uint32)(unsafe.Pointer(&mine[offCtlJoined])), 1)
}

// close detaches from the rings, wakes the ranks that may wait on this
// one, and closes the progress engine.
func (a *shmSide) close() {
	for _, c := range a.closers {
		c()
	}
	asm.Fence() // Wake's contract
	for _, l := range a.links {
		l.Wake()
	}
	a.prog.Close()
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
	err := r.readPart(peer, addr, dst)
	if err == nil {
		pvCMA.Add(1)
	}
	return err
}

func (r *shmReader) splitAt(peer, n int) int {
	least := int(splitMin.Get())
	if peer == r.self || r.disabled || least == 0 || n < least || rndvMode.Get() == "pipeline" {
		return n
	}
	return (n - n*int(splitShare.Get())/100) &^ 63
}

func (r *shmReader) readPart(peer int, addr uint64, dst []byte) error {
	return r.cross(readProcess, peer, addr, dst)
}

func (r *shmReader) writeRemote(peer int, addr uint64, src []byte) error {
	return r.cross(writeProcess, peer, addr, src)
}

// cross copies with op to or from peer's memory; once the kernel refuses
// cross-memory attach, it stops trying.
func (r *shmReader) cross(op func(int, uint64, []byte) error, peer int, addr uint64, b []byte) error {
	if r.disabled {
		return errCMAOff
	}
	err := op(r.job.pid(peer), addr, b)
	if err != nil && isPermission(err) {
		r.disabled = true
	}
	return err
}
