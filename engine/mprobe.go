package engine

import (
	"context"
	"fmt"
	"sync"
)

// Matched probe (MPI-3's MPI_Improbe, MPI_Mprobe, MPI_Mrecv, MPI_Imrecv).
// Probe then Recv races at MPI_THREAD_MULTIPLE: between the two calls
// another goroutine's receive may take the message probed, and the Recv
// then gets another message, of another size, or waits. A matched probe
// takes the message it finds off the unexpected queues, so that no other
// receive or probe can match it, and hands back a Message through which
// one receive, and only it, gets the message.
//
// A matched message stays what it was while unexpected (an eager
// message's bytes in the endpoint's pool, still arriving or whole, or a
// rendezvous announcement), held in the matcher's list of matched
// messages instead of the four unexpected lists, until its receive takes
// it as a receive posted for it would have (takeUnexpected): a rendezvous
// starts then, and an eager message still arriving completes the receive
// with its last fragment.

// Message is a message a matched probe took (MPI_Message): no receive or
// probe but a receive of the Message itself can match it any more. It is
// received once, by Mrecv or Imrecv; a Message already received, or the
// zero Message, is refused with ErrRequest. It belongs to the endpoint
// that probed it.
type Message struct {
	u   *unexpected
	gen uint32
}

// Improbe looks, as Iprobe does, for a message from src (or AnySource)
// with tag (or AnyTag) in ctx; if one can be received it takes it off the
// unexpected queues and returns it with its status and true. It fails if
// the endpoint is closed or src is gone.
func (ep *Endpoint) Improbe(src, tag int, ctx uint32) (Message, Status, bool, error) {
	m, st, ok, err := ep.improbe(src, tag, ctx)
	if !ok && err == nil {
		ep.prog.Progress()
	}
	return m, st, ok, err
}

// improbe is Improbe without polling.
func (ep *Endpoint) improbe(src, tag int, ctx uint32) (Message, Status, bool, error) {
	if err := ep.checkSource(src, tag); err != nil {
		return Message{}, Status{}, false, err
	}
	ep.lock()
	defer ep.unlock()
	if ep.closed {
		return Message{}, Status{}, false, ErrClosed
	}
	if u := ep.m.findUnexpected(ctx, src, tag); u != nil {
		ep.m.dequeue(u)
		ep.uqLevel.Sub(1)
		ep.m.hold(u)
		return Message{u: u, gen: u.gen}, Status{Source: int(u.src), Tag: int(u.tag), Count: u.length}, true, nil
	}
	if src != AnySource && ep.peers[src].dead != nil {
		return Message{}, Status{}, false, ep.peers[src].dead
	}
	return Message{}, Status{}, false, nil
}

// Mprobe waits, as Probe does, until a message from src with tag in ctx
// can be received, takes it off the unexpected queues and returns it with
// its status. It fails if src (or, for AnySource, every other rank) is
// gone.
func (ep *Endpoint) Mprobe(src, tag int, ctx uint32) (Message, Status, error) {
	return ep.MprobeContext(context.Background(), src, tag, ctx)
}

// MprobeContext is Mprobe bounded by cx: if cx ends before a message is
// found it returns cx's error (context.Canceled, DeadlineExceeded), and has
// taken nothing.
func (ep *Endpoint) MprobeContext(cx context.Context, src, tag int, ctx uint32) (Message, Status, error) {
	if m, st, ok, err := ep.improbe(src, tag, ctx); ok || err != nil {
		return m, st, err
	}
	w := mproberPool.Get().(*mprober)
	w.ep, w.src, w.tag, w.ctx = ep, src, tag, ctx
	ep.startProbing()
	werr := ep.prog.WaitUntilContext(cx, w.ready)
	ep.stopProbing()
	m, st, err := w.m, w.st, w.err
	w.done()
	if err == nil && werr != nil {
		return Message{}, Status{}, werr // the condition never held: nothing taken
	}
	return m, st, err
}

// mprober is the state of a waiting Mprobe, pooled with its condition
// made once: a closure over the caller's variables, or a method value,
// would be allocated at every wait (WaitUntil's condition escapes), and
// RecvMessage's receives allocate nothing.
type mprober struct {
	ep       *Endpoint
	src, tag int
	ctx      uint32
	m        Message
	st       Status
	err      error
	found    bool        // look has held
	ready    func() bool // w.look, bound once
}

var mproberPool = sync.Pool{New: func() any {
	w := new(mprober)
	w.ready = w.look
	return w
}}

// look is the condition Mprobe waits for: a message taken, or an error.
// Once it holds it holds without looking again: the wait may ask again
// (the condition a parking goroutine checks is asked once more by the
// loop), and a second look would take a second message, losing the
// first.
func (w *mprober) look() bool {
	if w.found {
		return true
	}
	var ok bool
	w.m, w.st, ok, w.err = w.ep.improbe(w.src, w.tag, w.ctx)
	w.found = ok || w.err != nil || w.ep.probeHopeless(w.src, &w.err)
	return w.found
}

// done clears w and gives it back to the pool.
func (w *mprober) done() {
	*w = mprober{ready: w.ready}
	mproberPool.Put(w)
}

// startProbing counts a goroutine waiting for a message to arrive (Probe,
// Mprobe): a message queued unexpected then rings the doorbell, and peers
// are checked while it waits.
func (ep *Endpoint) startProbing() {
	ep.lock()
	ep.probing++
	ep.unlock()
}

// stopProbing ends startProbing's count.
func (ep *Endpoint) stopProbing() {
	ep.lock()
	ep.probing--
	ep.unlock()
}

// probeHopeless reports whether a probe of src that found nothing can
// never find anything: src is AnySource and every other rank is gone. It
// then sets *err.
func (ep *Endpoint) probeHopeless(src int, err *error) bool {
	if src == AnySource && ep.size > 1 && ep.allPeersGone() {
		*err = errPeersGone
		return true
	}
	return false
}

// Imrecv starts the receive of m into buf (MPI_IMRECV): the request
// completes as a receive's that matched the message would, truncation
// included. m is used up, whatever the outcome; an m already received is
// refused with ErrRequest.
func (ep *Endpoint) Imrecv(m Message, buf []byte) (*Request, error) {
	ep.lock()
	r, err := ep.startMrecv(m, buf)
	ep.unlock()
	return r, err
}

// Mrecv receives m into buf (MPI_MRECV) and returns the message's status.
// Truncation returns ErrTruncate with the status of what was stored, as
// Recv does.
func (ep *Endpoint) Mrecv(m Message, buf []byte) (Status, error) {
	r, err := ep.Imrecv(m, buf)
	if err != nil {
		return Status{}, err
	}
	return r.Wait()
}

// startMrecv is Imrecv under the endpoint's lock.
func (ep *Endpoint) startMrecv(m Message, buf []byte) (*Request, error) {
	if ep.closed {
		return nil, ErrClosed
	}
	u := m.u
	if u == nil || u.gen != m.gen || !u.held {
		return nil, fmt.Errorf("%w: a message that was already received, or no message", ErrRequest)
	}
	r, err := ep.newRequest(kindRecv, buf, int(u.src), int(u.tag), u.ctx)
	if err != nil {
		return nil, err // m stays matched: a receive may try again
	}
	ep.m.unhold(u)
	if err := ep.heldLost(u); err != nil {
		r.status.Source, r.status.Tag = int(u.src), int(u.tag)
		ep.pool.put(u.data)
		ep.m.freeUnexpected(u)
		ep.complete(r, err)
		return r, nil
	}
	ep.takeUnexpected(r, u)
	return r, nil
}

// heldLost returns the error of the receive of a matched message whose
// data will never come (its sender died before sending it, or broke the
// protocol), nil if it is here or will be.
func (ep *Endpoint) heldLost(u *unexpected) error {
	if err := ep.m.heldErrs[u]; err != nil {
		delete(ep.m.heldErrs, u)
		return err
	}
	if dead := ep.peers[u.src].dead; dead != nil && (u.kind == uqRTS || u.got < u.length) {
		return dead
	}
	return nil
}

// endPartial ends an unexpected eager message whose remaining fragments
// will never come: dropped, or, matched by a probe, kept for its receive
// to fail with err.
func (ep *Endpoint) endPartial(u *unexpected, err error) {
	if !u.held {
		ep.dropUnexpected(u)
		return
	}
	if ep.m.heldErrs == nil {
		ep.m.heldErrs = make(map[*unexpected]error)
	}
	if ep.m.heldErrs[u] == nil {
		ep.m.heldErrs[u] = err
	}
}

// hold puts u, dequeued, in the list of matched messages, under a new
// generation. The list links through links[byExact], free while u is in
// no list of the four (lists[byExact] stays nil).
func (m *matcher) hold(u *unexpected) {
	u.held = true
	u.gen++
	u.links[byExact] = uqLink{next: m.held}
	if m.held != nil {
		m.held.links[byExact].prev = u
	}
	m.held = u
}

// unhold takes u out of the list of matched messages: its receive has
// started.
func (m *matcher) unhold(u *unexpected) {
	lk := u.links[byExact]
	if lk.prev != nil {
		lk.prev.links[byExact].next = lk.next
	} else {
		m.held = lk.next
	}
	if lk.next != nil {
		lk.next.links[byExact].prev = lk.prev
	}
	u.links[byExact] = uqLink{}
	u.held = false
}
