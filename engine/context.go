package engine

import (
	"context"
	"errors"
	"math"

	"github.com/tachyon-hpc/tachyon/asm"
	"github.com/tachyon-hpc/tachyon/rings"
)

// Operations bounded by a Go context. Each blocking call has a form that
// takes one, cx (ctx, as everywhere in this package, is the
// communication context of the message). The contexts' rules:
//
//   - The context is looked at only when the call must wait, and the
//     wait is progress.Engine.WaitContext's: no allocation and no
//     goroutine while the context does not end, and for one that never
//     can (Done nil, as Background's) the plain wait.
//   - The error of a call the context ended is the context's, unwrapped
//     (context.Canceled, context.DeadlineExceeded): errors.Is tells it
//     from the engine's own.
//   - An operation the context ended is withdrawn, never left half done:
//     a receive is cancelled, so that no message is consumed (the next
//     receive gets it), and a send is cancelled (its receiver is asked
//     to drop the message if it has not matched it). Where the cancel
//     loses the race, because the message had matched already, the
//     operation completes and the call returns its outcome as if the
//     context had not ended: a receive's message, a send complete. Only
//     the receiver can withdraw a message it has been told of (a
//     rendezvous's announcement, a synchronous send's first packet), so
//     such a send waits for the receiver's answer, which its next poll
//     gives, as an eager send half on its link waits for the room the
//     receiver's polls free: a receiver that stops polling delays it
//     until it polls again or is found dead.

// WaitContext is Wait bounded by cx: once r completes it returns r's
// status and error and r goes back to the pool, as after Wait. If cx ends
// first it returns cx's error and leaves r pending and the caller's: it
// may wait again, test, cancel or free it.
func (r *Request) WaitContext(cx context.Context) (Status, error) {
	if !r.Completion.Done() {
		if err := r.ep.prog.WaitContext(cx, &r.Completion); err != nil {
			return Status{}, err
		}
	}
	return r.Wait()
}

// WaitOrCancel is Wait bounded by cx, for an operation a context may
// abandon: if cx ends first, r is cancelled (a completed operation
// stands) and waited for. It returns cx's error, with Status.Cancelled
// set, if the cancel took effect, and r's outcome otherwise (the message
// had matched: a receive's message, a send's completion). Either way r
// goes back to the pool.
func (r *Request) WaitOrCancel(cx context.Context) (Status, error) {
	if !r.Completion.Done() {
		if err := r.ep.prog.WaitContext(cx, &r.Completion); err != nil {
			r.cancel(false)
			st, werr := r.Wait()
			if st.Cancelled {
				return st, err
			}
			return st, werr
		}
	}
	return r.Wait()
}

// RecvContext is Recv bounded by cx: a message received, or cx's error
// with no message consumed (WaitOrCancel).
func (ep *Endpoint) RecvContext(cx context.Context, buf []byte, src, tag int, ctx uint32) (Status, error) {
	if ep.serial { // else the endpoint's state may be read only under its lock
		if st, r, ok, err := ep.recvDirectPost(buf, src, tag, ctx); ok {
			if r == nil || err != nil {
				return st, err
			}
			return r.WaitOrCancel(cx)
		}
	}
	if err := ep.checkSource(src, tag); err != nil {
		return Status{}, err
	}
	ep.lock()
	if ep.closed {
		ep.unlock()
		return Status{}, ErrClosed
	}
	r, err := ep.startRecv(buf, src, tag, ctx)
	ep.unlock()
	if err != nil {
		return Status{}, err
	}
	return r.WaitOrCancel(cx)
}

// recvDirectPost is recvDirect for RecvContext: the same looks at the
// source's inbox, but a receive it had to post is returned, for the
// caller to wait on within its context, instead of waited for. A copy,
// not a shared body: recvDirect keeps its wait in line for the plain
// receive, whose latency it sets; keep the two in step.
func (ep *Endpoint) recvDirectPost(buf []byte, src, tag int, ctx uint32) (Status, *Request, bool, error) {
	m := &ep.m
	if m.nposted != 0 || m.nuq != 0 || ep.closed || ep.outq != 0 || uint(src) >= uint(ep.size) || uint(tag) > math.MaxInt32 {
		return Status{}, nil, false, nil
	}
	p := &ep.peers[src]
	rd := p.recs
	if rd == nil || p.dead != nil || p.rx.req != nil || p.rx.uq != nil {
		return Status{}, nil, false, nil
	}
	ep.releaseHeld(p)
	for range recvDirectPolls.Get() {
		asm.StoreRelaxed64(&ep.polls, ep.polls+1)
		if !rd.Ready() {
			ep.warmNext()
			continue
		}
		pkt, err := rd.Next(1)
		if pkt == nil {
			if err != nil {
				if !errors.Is(err, rings.ErrClosed) {
					ep.malformed.Inc()
				}
				return Status{}, nil, false, nil
			}
			ep.warmNext()
			continue
		}
		p.held++
		if len(pkt) >= shortHeader && pkt[offType] == pktShort && u32(pkt, shortCtx) == ctx && u32(pkt, shortTag) == uint32(tag) &&
			len(pkt)-shortHeader <= len(buf) {
			n := copyShort(buf, pkt[shortHeader:])
			return Status{Source: src, Tag: tag, Count: n}, nil, true, nil
		}
		r, err := ep.startRecv(buf, src, tag, ctx) // nothing unexpected: posted
		ep.handle(src, pkt)
		return Status{}, r, true, err
	}
	return Status{}, nil, false, nil
}

// SendContext is Send bounded by cx: nil once the send is complete (for
// Synchronous, once its receive has matched), or cx's error with the
// message withdrawn whole (WaitOrCancel). A send that goes out at once
// completes whatever cx says. A Buffered send never waits: it is Send.
func (ep *Endpoint) SendContext(cx context.Context, buf []byte, dest, tag int, ctx uint32, mode Mode) error {
	if mode == Buffered {
		return ep.Send(buf, dest, tag, ctx, mode)
	}
	var s Sent // the send is never cancelled once out at once: its name goes unused
	r, err := ep.IsendNow(buf, dest, tag, ctx, mode, &s)
	if r == nil {
		return err
	}
	_, err = r.WaitOrCancel(cx)
	return err
}

// ProbeContext is Probe bounded by cx: the status of a message that can
// be received, or cx's error.
func (ep *Endpoint) ProbeContext(cx context.Context, src, tag int, ctx uint32) (Status, error) {
	ep.lock()
	ep.probing++
	ep.unlock()
	defer func() {
		ep.lock()
		ep.probing--
		ep.unlock()
	}()
	var st Status
	var err error
	werr := ep.prog.WaitUntilContext(cx, func() bool {
		var ok bool
		st, ok, err = ep.probe(src, tag, ctx)
		if ok || err != nil {
			return true
		}
		if src == AnySource && ep.size > 1 && ep.allPeersGone() {
			err = errPeersGone
			return true
		}
		return false
	})
	if werr != nil {
		return Status{}, werr
	}
	return st, err
}

// BufferDetachContext is BufferDetach bounded by cx: if cx ends before
// the buffered messages have left, it returns cx's error and the buffer
// stays attached.
func (ep *Endpoint) BufferDetachContext(cx context.Context) ([]byte, error) {
	return ep.bufferDetach(cx.Done(), cx)
}

// closed reports whether done is closed, without blocking; a nil done
// never is.
func closed(done <-chan struct{}) bool {
	select {
	case <-done:
		return true
	default:
		return false
	}
}
