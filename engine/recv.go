package engine

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/tachyon-hpc/tachyon/asm"
	"github.com/tachyon-hpc/tachyon/rings"
)

// Inbound flow of one message:
//
//  1. Poll takes packets from each peer's inbox in order and hands them to
//     handle (poll.go, handle.go).
//  2. An eager or rts packet is matched against the posted receives
//     (matchPosted). Matched, its bytes go straight into the receive's
//     buffer; unmatched, it joins the unexpected queues, an eager
//     message's bytes copied into a pooled buffer.
//  3. Frag packets complete the eager message their peer is in the middle
//     of; data packets fill the rendezvous receive they name.
//  4. A receive posted later takes the earliest unexpected message it
//     matches (findUnexpected), or waits in the posted queue.
//  5. A rendezvous receive reads the sender's buffer directly where the
//     transport can (then sends fin), or sends cts and waits for data
//     (rendezvous.go).

// Irecv posts a receive into buf from rank src (or AnySource) with tag (or
// AnyTag) in context ctx. Its in-line case is a copy that earns its place:
// docs/engine.md, "Fast paths", counts what it saves.
func (ep *Endpoint) Irecv(buf []byte, src, tag int, ctx uint32) (*Request, error) {
	// The usual case in line (a window of receives): serial, a source and
	// a tag given, nothing unexpected to look through, every peer alive, a
	// request free and the key's posted list the one last looked up. It is
	// newRequest and startRecv's work for that case alone, without their
	// calls: at the receiving end of a message-rate loop posting was a
	// quarter of the instructions.
	if ep.serial { // else the endpoint's state may be read only under its lock
		m := &ep.m
		l := m.pcache.last.l
		if r := ep.reqs.free; l != nil && r != nil && m.nuq == 0 && !ep.impaired &&
			uint(src) < uint(len(ep.peers)) && uint(tag) <= math.MaxInt32 &&
			m.pcache.last.k == (key{ctx, int32(src), int32(tag)}) {
			// Taken off the pool, as reqTable.get does, and posted at the
			// list's tail, as reqList.push does (qnext is nil in the pool):
			// the words first, then the pointers side by side, for one
			// check of the write barrier.
			r.kind, r.peer, r.tag, r.ctx = kindRecv, src, tag, ctx
			r.Completion.Rearm()
			ep.inflight++
			r.state = stPosted
			m.postSeq++
			r.seq = m.postSeq
			m.nposted++
			ep.posted.Add(1)
			ep.postedHWM.Observe(int64(m.nposted))
			at := &l.head // where the list links r: its head, or its tail's next
			if t := l.tail; t != nil {
				at = &t.qnext
			}
			ep.reqs.free, r.buf, r.list, r.qprev, *at, l.tail = r.nextFree, buf, l, l.tail, r, r
			return r, nil
		}
	}
	return ep.irecv(buf, src, tag, ctx)
}

// irecv is Irecv in every case.
func (ep *Endpoint) irecv(buf []byte, src, tag int, ctx uint32) (*Request, error) {
	if err := ep.checkSource(src, tag); err != nil {
		return nil, err
	}
	ep.lock() // unlocked at each return, not deferred: the defer was 8% of this call's instructions
	if ep.closed {
		ep.unlock()
		return nil, ErrClosed
	}
	r, err := ep.startRecv(buf, src, tag, ctx)
	if !ep.serial || len(ep.woken) > 0 || ep.notify {
		ep.wakeUnlock() // unlock, whose usual case (serial, nothing owed) is in line here
	}
	return r, err
}

// Recv receives into buf and returns the message's status. Truncation
// returns ErrTruncate with the status of what was stored.
func (ep *Endpoint) Recv(buf []byte, src, tag int, ctx uint32) (Status, error) {
	if ep.serial { // else the endpoint's state may be read only under its lock
		if st, ok, err := ep.recvDirect(buf, src, tag, ctx); ok {
			return st, err
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
	if err != nil {
		ep.unlock()
		return Status{}, err
	}
	ep.unlock()
	return r.Wait()
}

// recvDirect is Recv's usual case for a serial endpoint (a ping-pong's
// receive): nothing posted or unexpected, and a source and tag given. It
// takes the source's packets from its inbox itself, as a poll would, for
// up to engine_recv_direct_polls looks. If the first packet is this
// receive's message in one short packet it copies it out: no request is
// posted, matched, completed and collected, which was most of the way from
// the packet's arrival to the answer a ping-pong sends. If it is another
// packet, the receive is posted before the packet is handled, so that its
// own message in another form (a rendezvous, a truncated message) is
// matched as it comes instead of queued unexpected, and then waited for.
// It reports whether it received; if not (the looks spent, or a case it
// does not take), Recv goes the general way. The other peers' packets wait
// while it looks.
func (ep *Endpoint) recvDirect(buf []byte, src, tag int, ctx uint32) (Status, bool, error) {
	m := &ep.m
	if m.nposted != 0 || m.nuq != 0 || ep.closed || ep.outq != 0 || uint(src) >= uint(ep.size) || uint(tag) > math.MaxInt32 {
		return Status{}, false, nil
	}
	p := &ep.peers[src]
	rd := p.recs
	if rd == nil || p.dead != nil || p.rx.req != nil || p.rx.uq != nil {
		return Status{}, false, nil
	}
	// What the last poll or look took is released first, as a poll does:
	// the room may be what the source waits for.
	ep.releaseHeld(p)
	for range recvDirectPolls.Get() {
		asm.StoreRelaxed64(&ep.polls, ep.polls+1) // a poll: a stream of sends to src ends here
		if !rd.Ready() {
			ep.warmNext() // as an empty poll does
			continue
		}
		pkt, err := rd.Next(1)
		if pkt == nil {
			if err != nil {
				if !errors.Is(err, rings.ErrClosed) {
					ep.malformed.Inc()
				}
				return Status{}, false, nil
			}
			ep.warmNext() // as an empty poll does
			continue
		}
		p.held++
		if len(pkt) >= shortHeader && pkt[offType] == pktShort && u32(pkt, shortCtx) == ctx && u32(pkt, shortTag) == uint32(tag) &&
			len(pkt)-shortHeader <= len(buf) {
			n := copyShort(buf, pkt[shortHeader:])
			return Status{Source: src, Tag: tag, Count: n}, true, nil
		}
		r, err := ep.startRecv(buf, src, tag, ctx) // nothing unexpected: posted
		ep.handle(src, pkt)
		if err != nil {
			return Status{}, true, err
		}
		st, err := r.Wait()
		return st, true, err
	}
	return Status{}, false, nil
}

// startRecv posts a receive: it takes the earliest unexpected message it
// matches, or joins the posted receives.
func (ep *Endpoint) startRecv(buf []byte, src, tag int, ctx uint32) (*Request, error) {
	r, err := ep.newRequest(kindRecv, buf, src, tag, ctx)
	if err != nil {
		return nil, err
	}
	if ep.m.nuq == 0 {
		// nothing to look for
	} else if u := ep.m.findUnexpected(ctx, src, tag); u != nil {
		ep.m.dequeue(u)
		ep.uqLevel.Sub(1)
		ep.takeUnexpected(r, u)
		return r, nil
	}
	if src != AnySource && ep.peers[src].dead != nil {
		ep.complete(r, ep.peers[src].dead)
		return r, nil
	}
	r.state = stPosted
	ep.m.post(r)
	ep.posted.Add(1)
	ep.postedHWM.Observe(int64(ep.m.nposted))
	return r, nil
}

// takeUnexpected hands an unexpected message, already dequeued, to the
// receive r.
func (ep *Endpoint) takeUnexpected(r *Request, u *unexpected) {
	r.status.Source, r.status.Tag = int(u.src), int(u.tag)
	if u.kind == uqRTS {
		ep.startRendezvous(r, int(u.src), u.length, u.sreq, u.addr, u.sync)
		ep.m.freeUnexpected(u)
		return
	}
	if u.sync {
		ep.queueCtl(int(u.src), ctlPacket{typ: pktFin, a: u.sreq})
	}
	if u.got < u.length {
		r.state = stReceiving
		r.uq = u
		u.waiter = r
		return
	}
	ep.finishFromUnexpected(r, u)
}

// finishFromUnexpected copies a complete unexpected message into r.
func (ep *Endpoint) finishFromUnexpected(r *Request, u *unexpected) {
	k := copy(r.buf, u.data[:u.length])
	r.status.Count = k
	r.uq = nil
	var err error
	if u.length > len(r.buf) {
		err = truncated(u.length, len(r.buf))
	}
	ep.pool.put(u.data)
	ep.m.freeUnexpected(u)
	ep.complete(r, err)
}

// truncated is the error of a msg-byte message received into a buf-byte
// buffer.
func truncated(msg, buf int) error {
	return &TruncateError{Length: msg, Buffer: buf}
}

// Iprobe reports whether a message from src with tag in ctx can be
// received now, and its status, without receiving it.
func (ep *Endpoint) Iprobe(src, tag int, ctx uint32) (Status, bool, error) {
	st, ok, err := ep.probe(src, tag, ctx)
	if !ok && err == nil {
		ep.prog.Progress()
	}
	return st, ok, err
}

// probe looks for a message from src with tag in ctx among those that
// have arrived, without polling. It fails if the endpoint is closed or src
// is gone.
func (ep *Endpoint) probe(src, tag int, ctx uint32) (Status, bool, error) {
	if err := ep.checkSource(src, tag); err != nil {
		return Status{}, false, err
	}
	ep.lock()
	defer ep.unlock()
	if ep.closed {
		return Status{}, false, ErrClosed
	}
	if u := ep.m.findUnexpected(ctx, src, tag); u != nil {
		return Status{Source: int(u.src), Tag: int(u.tag), Count: u.length}, true, nil
	}
	if src != AnySource && ep.peers[src].dead != nil {
		return Status{}, false, ep.peers[src].dead
	}
	return Status{}, false, nil
}

// Probe waits until a message from src with tag in ctx can be received,
// and returns its status. It fails if src (or, for AnySource, every
// other rank) is gone. It waits as Wait does: spinning, then pausing,
// then parked until a message arrives or a peer is found gone.
func (ep *Endpoint) Probe(src, tag int, ctx uint32) (Status, error) {
	return ep.ProbeContext(context.Background(), src, tag, ctx)
}

// errPeersGone is the error of a probe of AnySource once every other
// rank is gone.
var errPeersGone = fmt.Errorf("%w: every other rank is gone", ErrPeerDead)

// allPeersGone reports whether every rank but this one is gone.
func (ep *Endpoint) allPeersGone() bool {
	ep.lock()
	defer ep.unlock()
	for j := range ep.peers {
		if j != ep.rank && ep.peers[j].dead == nil {
			return false
		}
	}
	return true
}

// unexpected queues a new unexpected message. A goroutine parked in Probe
// may be waiting for it while another goroutine (the progress goroutine,
// or a caller polling) takes it in: the operation's end rings the
// doorbell.
func (ep *Endpoint) unexpected(ctx uint32, src int, tag int32) *unexpected {
	u := ep.m.newUnexpected(ctx, int32(src), tag)
	ep.uqLevel.Add(1)
	ep.uqHWM.Observe(int64(ep.m.nuq))
	if ep.probing > 0 && !ep.serial {
		ep.notify = true
	}
	return u
}
