package engine

import (
	"context"
	"fmt"
	"runtime"
	"time"
)

// Ending an endpoint from the layer above, for endpoints that live and
// die on their own (a connection between two services): a peer the layer
// above knows is gone before any transport can tell (FailPeer), and a
// close that first delivers what was sent, within a context's deadline
// (CloseContext).

// FailPeer marks rank gone for a reason the endpoint cannot see itself,
// such as the layer above losing its control connection to the peer's
// process. What the peer sent and this endpoint has not read yet is still
// delivered; then every operation that needs the peer fails with
// ErrPeerDead and cause, as when a transport finds it dead. It is safe to
// call from any goroutine, at any time; marking a peer twice keeps the
// first cause. After Close it does nothing.
func (ep *Endpoint) FailPeer(rank int, cause error) error {
	if rank < 0 || rank >= ep.size || rank == ep.rank {
		return fmt.Errorf("%w: rank %d of a %d-rank world cannot be failed by rank %d", ErrRank, rank, ep.size, ep.rank)
	}
	ep.failMu.Lock()
	if ep.shut {
		ep.failMu.Unlock()
		return nil // closed: nothing waits any more, and its doorbell may be gone
	}
	if ep.failed == nil {
		ep.failed = make(map[int]error)
	}
	if _, ok := ep.failed[rank]; !ok {
		ep.failed[rank] = cause
	}
	ep.failing.Store(true)
	ep.prog.Doorbell().Ring() // a parked waiter polls, and its next peer check finds it
	ep.failMu.Unlock()        // after the ring: Close waits for it before the doorbell may go
	return nil
}

// failedCause returns the cause FailPeer gave for rank, nil if none.
// Peer checks call it, off the message path.
func (ep *Endpoint) failedCause(rank int) error {
	if !ep.failing.Load() {
		return nil
	}
	ep.failMu.Lock()
	defer ep.failMu.Unlock()
	return ep.failed[rank]
}

// CloseContext is Close after delivering what was sent: it drives
// progress until every send started on the endpoint has completed (its
// peer took it, or is gone) and, over the network, until the peers have
// acknowledged every frame, or until ctx ends. Then it closes: what is
// still pending fails with ErrClosed. It returns ctx's error if ctx ended
// first (the endpoint is closed all the same), ErrClosed if it was
// closed already.
func (ep *Endpoint) CloseContext(ctx context.Context) error {
	err := ep.drainSends(ctx)
	if dl, ok := ctx.Deadline(); ok {
		ep.lock()
		if ep.net != nil {
			ep.net.lingerUntil = dl
		}
		ep.unlock()
	}
	if cerr := ep.Close(); cerr != nil {
		return cerr
	}
	return err
}

// drainSends waits until no send is pending, or ctx ends.
func (ep *Endpoint) drainSends(ctx context.Context) error {
	for i := 0; ; i++ {
		ep.lock()
		closed, n := ep.closed, ep.pendingSends()
		ep.unlock()
		if closed || n == 0 {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if ep.prog.Progress() == 0 {
			if i < 1000 {
				runtime.Gosched()
			} else {
				time.Sleep(50 * time.Microsecond)
			}
		}
	}
}

// pendingSends counts the sends not yet complete; the caller holds the
// endpoint.
func (ep *Endpoint) pendingSends() int {
	n := 0
	for c := 0; c < ep.reqs.n; c++ {
		chunk := ep.reqs.chunks[c].Load()
		for j := range chunk {
			r := &chunk[j]
			if r.kind == kindSend && r.state != stFree && r.state != stDone {
				n++
			}
		}
	}
	return n
}
