package engine

import (
	"errors"
	"fmt"
	"sync"

	"github.com/tachyon-hpc/tachyon/asm"
	"github.com/tachyon-hpc/tachyon/progress"
	"github.com/tachyon-hpc/tachyon/rings"
)

// World is a job whose ranks are goroutines of this process: every pair
// of ranks, and each rank with itself, is joined by a ring in ordinary
// memory, and rendezvous messages are copied straight from the
// sender's buffer. It backs mpi.Run and most tests.
type World struct {
	eps      []*Endpoint
	hostOnce sync.Once
	host     *HostColl // the collective areas, made at the first HostColl
	geom     collGeom
}

// hostColl returns the world's collective areas, in ordinary memory,
// made at the first call.
func (w *World) hostColl() *HostColl {
	w.hostOnce.Do(func() {
		if w.geom.areas == 0 {
			return
		}
		ranks := make([]int, len(w.eps))
		for i := range ranks {
			ranks[i] = i
		}
		w.host = newHostColl(rings.AlignedBytes(w.geom.size()), w.geom, ranks, len(w.eps))
	})
	return w.host
}

// NewWorld makes a world of n ranks, each with its own progress engine,
// made with opts; with engine_net_force, ranks talk over the network
// transport.
func NewWorld(n int, opts ...progress.Option) (*World, error) {
	if n < 1 {
		return nil, fmt.Errorf("%w: a world needs at least one rank, not %d", ErrConfig, n)
	}
	if netForce.Get() {
		return newNetWorld(n, opts)
	}
	size, err := pairRingSize()
	if err != nil {
		return nil, err
	}
	w := &World{eps: make([]*Endpoint, n), geom: currentCollGeom(n)}
	progs := make([]*progress.Engine, n)
	for i := range progs {
		if progs[i], err = progress.New(opts...); err != nil {
			return nil, err
		}
	}
	// links[i][j] carries i -> j; inboxes[j][i] receives it.
	links := make([][]Link, n)
	inboxes := make([][]Inbox, n)
	ends := make([][]closer, n) // rank i's ends of its rings
	counts := make([][]transportCounters, n)
	for i := range links {
		links[i] = make([]Link, n)
		inboxes[i] = make([]Inbox, n)
		counts[i] = make([]transportCounters, n)
	}
	for i := 0; i < n; i++ {
		for j := 0; j < n; j++ {
			r, err := newPairRing(rings.AlignedBytes(size))
			if err != nil {
				return nil, fmt.Errorf("%w: %v", ErrConfig, err)
			}
			bell := progs[j].Doorbell()
			counts[i][j] = countInproc
			if i == j {
				bell = nil
				counts[i][j] = countSelf
			}
			l, lc, err := r.link(bell)
			if err != nil {
				return nil, err
			}
			in, ic, err := r.inbox()
			if err != nil {
				return nil, err
			}
			links[i][j], inboxes[j][i] = l, in
			ends[i] = append(ends[i], lc)
			ends[j] = append(ends[j], ic)
		}
	}
	for i := range w.eps {
		ep, err := newEndpoint(i, links[i], inboxes[i], counts[i], progs[i], w)
		if err != nil {
			return nil, err
		}
		ep.hostColl = w.hostColl
		ep.onClose = append(ep.onClose, func() {
			for _, e := range ends[i] {
				e.close()
			}
			asm.Fence() // Wake's contract
			for _, l := range links[i] {
				l.Wake() // a peer waiting on this rank sees it gone
			}
			progs[i].Close()
		})
		w.eps[i] = ep
	}
	return w, nil
}

// Endpoint returns rank i's endpoint.
func (w *World) Endpoint(i int) *Endpoint { return w.eps[i] }

// Size returns the number of ranks.
func (w *World) Size() int { return len(w.eps) }

// readRemote copies a rendezvous message from the sending rank's buffer:
// the request it names stays put until this receiver answers fin.
func (w *World) readRemote(peer int, sreq, _ uint64, dst []byte) error {
	r := w.eps[peer].reqs.peerLookup(sreq)
	if r == nil {
		return fmt.Errorf("%w: rank %d has no send request %#x", ErrMalformed, peer, sreq)
	}
	copy(dst, r.buf)
	return nil
}

var errNoSplit = errors.New("goroutine ranks do not split a copy")

// Goroutine ranks do not split a copy: the receiver copies the whole
// message in readRemote.
func (w *World) splitAt(_, n int) int { return n }

func (w *World) readPart(int, uint64, []byte) error { return errNoSplit }

func (w *World) writeRemote(int, uint64, []byte) error { return errNoSplit }
