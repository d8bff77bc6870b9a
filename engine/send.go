package engine

import (
	"fmt"
	"math"
	"unsafe"

	"github.com/tachyon-hpc/tachyon/progress"
)

// Outbound flow of one message:
//
//  1. Isend takes a request from the pool and appends it to the
//     destination's send queue; if the queue was empty it pushes at once.
//  2. Eager (up to engine_eager_limit): the first packet carries the
//     header and as much payload as fits, frag packets the rest, all
//     contiguous on the link. A standard send completes once its last
//     byte is on the link; a synchronous one waits for the receiver's fin.
//  3. Rendezvous (larger): an rts packet announces the message and the
//     address of its buffer; the request leaves the queue and waits. The
//     receiver either reads the buffer itself (one copy) and answers fin,
//     or answers cts, and the send streams data packets from its data
//     queue, completing with the last one.
//  4. Whatever finds no room on the link stays queued and Poll pushes it
//     later; control packets (cts, fin, cancel answers) go first.
//
// Packets of one link leave in queue order, so messages between two ranks
// never overtake one another, whatever protocol each takes.

// Send sends buf to rank dest and returns once buf may be reused (for
// Synchronous, once the receive has matched). A small standard send that
// finds room on its link completes without a request. Its short path is a
// copy of IsendNow's that earns its place: docs/engine.md, "Fast paths".
func (ep *Endpoint) Send(buf []byte, dest, tag int, ctx uint32, mode Mode) error {
	if err := ep.checkDest(dest, tag); err != nil {
		return err
	}
	ep.lock()
	if ep.closed {
		ep.unlock()
		return ErrClosed
	}
	// A blocking send is never cancelled: its short packet names no send.
	if ep.peers[dest].shortFits(buf, mode) && ep.pushShort(dest, buf, ctx, tag, 0) {
		ep.unlock()
		return nil
	}
	r, err := ep.startSend(buf, dest, tag, ctx, mode)
	if err != nil {
		ep.unlock()
		return err
	}
	if mode == Buffered {
		// The message is in the attached buffer: the send goes on alone
		// and its request is recycled when it completes.
		if r.state == stDone {
			err = r.err
			ep.releaseLocked(r)
		} else {
			r.freed = true
		}
		ep.unlock()
		return err
	}
	ep.unlock()
	_, err = r.Wait()
	return err
}

// Isend starts a send of buf to rank dest. buf must not change until the
// request completes. It keeps its own short path rather than calling
// IsendNow: its request must exist before the message leaves, so that a
// full request table fails the send instead of reporting a message sent.
func (ep *Endpoint) Isend(buf []byte, dest, tag int, ctx uint32, mode Mode) (*Request, error) {
	if err := ep.checkDest(dest, tag); err != nil {
		return nil, err
	}
	ep.lock()
	defer ep.unlock()
	if ep.closed {
		return nil, ErrClosed
	}
	if p := &ep.peers[dest]; p.shortFits(buf, mode) {
		// Out at once and complete at once, without the send queue.
		r, err := ep.newRequest(kindSend, buf, dest, tag, ctx)
		if err != nil {
			return nil, err
		}
		r.mode = mode
		r.sid = p.nextSID()
		if ep.pushShort(dest, buf, ctx, tag, r.sid) {
			r.sent = len(buf)
			ep.complete(r, nil)
		} else {
			ep.enqueueSend(r) // no room: it waits its turn
		}
		return r, nil
	}
	return ep.startSend(buf, dest, tag, ctx, mode)
}

// Sent names a message IsendNow put on its link, for CancelSent. The zero
// Sent names none.
type Sent struct {
	// Two words, each as a short packet's header holds it, so that the
	// send that returns one moves two registers, not four.
	destCtx uint64 // destination | context<<32
	tagSID  uint64 // tag | short id<<32: the short packet's second word
}

// Valid reports whether s names a message.
func (s Sent) Valid() bool { return s.sid() != 0 }

func (s Sent) dest() int32 { return int32(uint32(s.destCtx)) }
func (s Sent) ctx() uint32 { return uint32(s.destCtx >> 32) }
func (s Sent) tag() int32  { return int32(uint32(s.tagSID)) }
func (s Sent) sid() uint32 { return uint32(s.tagSID >> 32) }

// nextSID returns a new short id for a send to p, never 0: p.sid counts
// by two, and the id is that count less one, an odd number. Two messages
// share one only 2^31 short packets apart. A count by one had to skip 0
// where it wrapped: 3 instructions more a send.
func (p *peer) nextSID() uint32 {
	n := p.sid + 2
	p.sid = n
	return n - 1
}

// CancelSent asks the receiver of the message s names (sent by IsendNow) to
// drop it if no receive has matched it yet (MPI_CANCEL of a send that
// completed at once). The request it returns completes with the answer:
// Status.Cancelled says whether the message was withdrawn. A message to a
// rank that is gone stays sent.
func (ep *Endpoint) CancelSent(s Sent) (*Request, error) {
	ep.lock()
	defer ep.unlock()
	if ep.closed {
		return nil, ErrClosed
	}
	if !s.Valid() || s.dest() < 0 || int(s.dest()) >= ep.size {
		return nil, fmt.Errorf("%w: no message sent to cancel", ErrRequest)
	}
	r, err := ep.newRequest(kindSend, nil, int(s.dest()), int(s.tag()), s.ctx())
	if err != nil {
		return nil, err
	}
	r.sid = s.sid()
	if ep.peers[r.peer].dead != nil {
		ep.complete(r, nil)
		return r, nil
	}
	r.state = stAwaitFin
	r.cancelling = true
	ep.queueCtl(r.peer, ctlPacket{typ: pktCancel, a: r.id, ctx: r.ctx, tag: int32(r.tag), sid: r.sid})
	return r, nil
}

// IsendNow is Isend for a caller that needs no request for a send that
// completes at once. A message that can go as one short packet now
// (standard or ready mode, no larger than a packet and the eager limit,
// nothing queued ahead of it on the link, and room there) is sent:
// IsendNow returns no request and no error, and *at names the message
// for CancelSent. Any other send is started as Isend starts it and its
// request returned, and *at is made zero, as on an error. It spares a
// send that completes at once the request a Wait would otherwise have to
// collect, and its caller the arguments it would need to start the send
// itself. *at is written before the message is published: the call into
// assembly that publishes it is then the last but for the wake-up, with
// little of the caller's to keep across it (7.5 instructions fewer a
// send in mpi's Isend, which passes its request's own Sent).
//
// Out of line: the ring write below goes in line here by the profile's
// edge from IsendNow to TryWriteWords (bench/default.pgo; TryWriteWords
// is over the compiler's budget). Put in line in a caller, the write
// would be a call inside a call put in line, which the profile does not
// find (golang/go#69046), and stay a call; one call either way, and this
// way it is this one, wherever the caller is: the facade's Isend, in line
// in a loop or not, calls IsendNow and IsendNow the assembly that
// publishes the message (bench's TestProfileInlining).
//
//go:noinline
func (ep *Endpoint) IsendNow(buf []byte, dest, tag int, ctx uint32, mode Mode, at *Sent) (*Request, error) {
	// checkDest, bounded by len(peers) (the world's size, set once) so
	// that the index below needs no check of its own, even after a lock
	// that may have called out.
	peers := ep.peers
	if uint(dest) >= uint(len(peers)) || uint(tag) > math.MaxInt32 {
		*at = Sent{}
		return nil, ep.destError(dest, tag)
	}
	ep.lock() // unlocked at each return, not deferred: the defer was 5% of this call's instructions
	p := &peers[dest]
	if ep.impaired || !p.fitsNow(buf, mode) { // impaired: closed, or a peer gone (shortFits' check of p)
		return ep.startSendUnlock(buf, dest, tag, ctx, mode, at)
	}
	h0, h1 := shortWords(ctx, int32(tag), p.nextSID())
	*at = Sent{destCtx: uint64(uint32(dest)) | uint64(ctx)<<32, tagSID: h1}
	if l := p.rout; l != nil {
		// writeShort written out, the ring's writer called here so that
		// the profile puts it in line: a send that goes out at once then
		// calls only the assembly that publishes it, and keeps few values
		// across that call. The profile finds a call by its line less
		// its function's first: remake it (bench/pgo.sh) after moving
		// this call, as TestProfileInlining, which finds it by name,
		// then says.
		l.setStream()
		if l.w.TryWriteWords(recordType, h0, h1, buf) != nil {
			return ep.startSendUnlock(buf, dest, tag, ctx, mode, at)
		}
	} else if !p.out.Put(h0, h1, buf) {
		return ep.startSendUnlock(buf, dest, tag, ctx, mode, at)
	}
	p.countShort(len(buf))
	if ep.serial && len(ep.woken) == 0 && !ep.notify {
		// The one wake-up this call owes, sent at once: what unlock would
		// do for it, without the list.
		progress.WakeFence()
		if l := p.rout; l != nil {
			if l.bell != nil && !l.bell.Quiet() {
				l.bell.RingFenced() // Wake, its usual case in line
			}
		} else {
			p.out.Wake()
		}
	} else {
		ep.wakeLater(dest)
		ep.unlock()
	}
	return nil, nil
}

// startSendUnlock starts, for IsendNow, a send that does not go out at
// once, as Isend does with no room on the link (its request waits its
// turn in the send queue), or fails it on a closed endpoint; it makes
// *at zero and unlocks the endpoint.
func (ep *Endpoint) startSendUnlock(buf []byte, dest, tag int, ctx uint32, mode Mode, at *Sent) (*Request, error) {
	*at = Sent{}
	if ep.closed {
		ep.unlock()
		return nil, ErrClosed
	}
	r, err := ep.startSend(buf, dest, tag, ctx, mode)
	ep.unlock()
	return r, err
}

// shortFits reports whether a send of buf to p in mode can go as one
// short packet now: standard or ready mode, one packet's worth, eager,
// and nothing queued ahead of it on the link.
func (p *peer) shortFits(buf []byte, mode Mode) bool {
	return p.dead == nil && p.fitsNow(buf, mode)
}

// fitsNow is shortFits but for p's death, for a caller that learns of it
// from the endpoint's impaired flag with its other checks.
func (p *peer) fitsNow(buf []byte, mode Mode) bool {
	return (mode == Standard || mode == Ready) && p.sendq.head == nil &&
		len(buf) <= p.short && len(buf) <= int(eagerLimit.Get())
}

// pushShort puts buf on the link to dest as a short packet naming the send
// sid, and reports whether the link had room.
func (ep *Endpoint) pushShort(dest int, buf []byte, ctx uint32, tag int, sid uint32) bool {
	if !ep.peers[dest].writeShort(buf, ctx, tag, sid) {
		return false
	}
	ep.wakeLater(dest)
	return true
}

// writeShort is pushShort without the wake-up it owes the peer.
func (p *peer) writeShort(buf []byte, ctx uint32, tag int, sid uint32) bool {
	h0, h1 := shortWords(ctx, int32(tag), sid)
	if !p.out.Put(h0, h1, buf) {
		return false
	}
	p.countShort(len(buf))
	return true
}

// countShort counts a short packet of n bytes sent to p.
func (p *peer) countShort(n int) {
	p.count.msgs.Inc()
	p.count.bytes.Add(uint64(n))
}

func (ep *Endpoint) startSend(buf []byte, dest, tag int, ctx uint32, mode Mode) (*Request, error) {
	if mode == Buffered {
		b, release, err := ep.attached.take(buf)
		if err != nil {
			return nil, err
		}
		r, err := ep.newRequest(kindSend, b, dest, tag, ctx)
		if err != nil {
			release()
			return nil, err
		}
		r.release = release
		r.mode = Standard
		ep.enqueueSend(r)
		return r, nil
	}
	r, err := ep.newRequest(kindSend, buf, dest, tag, ctx)
	if err != nil {
		return nil, err
	}
	r.mode = mode
	ep.enqueueSend(r)
	return r, nil
}

func (ep *Endpoint) enqueueSend(r *Request) {
	p := &ep.peers[r.peer]
	if p.dead != nil {
		ep.complete(r, p.dead)
		return
	}
	r.state = stQueued
	wasEmpty := p.sendq.head == nil
	p.sendq.push(r)
	if wasEmpty {
		ep.flush(r.peer)
	}
	if p.sendq.head != nil {
		ep.stalled(p)
	}
}

// stalled marks p queued after a flush left packets for want of room on
// its link: a full-ring stall (engine_link_full) unless it was queued
// already.
func (ep *Endpoint) stalled(p *peer) {
	if !p.queued {
		ep.linkFull.Inc()
	}
	ep.markQueued(p)
}

// markQueued counts p in outq, and puts it on the list flushAll walks.
func (ep *Endpoint) markQueued(p *peer) {
	if !p.queued {
		p.queued = true
		ep.outq++
		if !p.inQ {
			p.inQ = true
			ep.qpeers = append(ep.qpeers, int32(ep.peerIndex(p)))
		}
	}
}

// peerIndex returns the rank of p, one of ep.peers.
func (ep *Endpoint) peerIndex(p *peer) int {
	return int((uintptr(unsafe.Pointer(p)) - uintptr(unsafe.Pointer(unsafe.SliceData(ep.peers)))) / unsafe.Sizeof(peer{}))
}

// flushAll pushes what waits on the links of the peers queued and
// returns the packets sent: it walks those (qpeers), not every peer, and
// drops from the list the ones no longer queued.
func (ep *Endpoint) flushAll() int {
	n := 0
	for j := 0; j < len(ep.qpeers); {
		i := int(ep.qpeers[j])
		p := &ep.peers[i]
		if p.queued {
			n += ep.flush(i)
		}
		if !p.queued {
			p.inQ = false
			last := len(ep.qpeers) - 1
			ep.qpeers[j] = ep.qpeers[last]
			ep.qpeers = ep.qpeers[:last]
			continue
		}
		j++
	}
	return n
}

// flush pushes control packets, then the send queue's head, then
// streaming data, until the link to peer i is full or nothing waits.
func (ep *Endpoint) flush(i int) int {
	p := &ep.peers[i]
	n := 0
	for len(p.ctl) > 0 {
		c := p.ctl[0]
		size := finHeader
		switch c.typ {
		case pktCancel:
			size = cancelHeader
		case pktCTS:
			size = ctsHeader
		case pktCTW:
			size = ctwHeader
		case pktWritten:
			size = writtenHeader
		}
		pkt := p.out.Reserve(size)
		if pkt == nil {
			goto out
		}
		switch c.typ {
		case pktCancel:
			putIDs(pkt[:cancelHeader], c.typ, c.flags, c.a, uint64(uint32(c.tag))|uint64(c.sid)<<32)
			put32(pkt, cancelCtx, c.ctx)
		case pktCTS, pktWritten:
			putIDs(pkt[:ctsHeader], c.typ, c.flags, c.a, c.b)
		case pktCTW:
			putIDs(pkt[:ctwHeader], c.typ, c.flags, c.a, c.b)
			put64(pkt, ctwOff, c.c)
			put64(pkt, ctwLen, c.d)
			put64(pkt, ctwAddr, c.e)
		default:
			putIDs(pkt[:finHeader], c.typ, c.flags, c.a, 0)
		}
		p.out.Commit(size)
		copy(p.ctl, p.ctl[1:])
		p.ctl = p.ctl[:len(p.ctl)-1]
		n++
	}
	for r := p.sendq.head; r != nil; r = p.sendq.head {
		k, done := ep.pushSend(p, r)
		n += k
		if !done {
			goto out
		}
	}
	for r := p.dataq.head; r != nil; r = p.dataq.head {
		k, done := ep.pushData(p, r)
		n += k
		if !done {
			goto out
		}
	}
out:
	if n > 0 {
		ep.wakeLater(i)
	}
	if p.queued && len(p.ctl) == 0 && p.sendq.head == nil && p.dataq.head == nil {
		p.queued = false
		ep.outq--
	}
	return n
}

// pushSend pushes the packets of the send at the head of p's queue and
// reports whether it left the queue.
func (ep *Endpoint) pushSend(p *peer, r *Request) (int, bool) {
	n := 0
	total := len(r.buf)
	max := p.out.MaxPacket()
	if r.state == stQueued {
		rndv := total > int(eagerLimit.Get()) || p.eager > 0 && total > p.eager
		size := rtsHeader
		if !rndv {
			size = eagerHeader + min(total, max-eagerHeader)
		}
		pkt := p.out.Reserve(size)
		if pkt == nil {
			return 0, false
		}
		n++
		var flags byte
		if r.mode == Synchronous {
			flags = flagSync
		}
		if rndv {
			putRTS(pkt, flags, r.ctx, int32(r.tag), uint64(total), r.id, uint64(uintptr(unsafe.Pointer(unsafe.SliceData(r.buf)))))
			p.sendq.pop()
			r.state = stAwaitFin // before the commit: the receiver may look at r at once
			p.out.Commit(rtsHeader)
			p.count.msgs.Inc()
			p.count.bytes.Add(uint64(total))
			ep.rndv.Inc()
			return n, true
		}
		putEager(pkt, flags, r.ctx, int32(r.tag), uint32(total), r.id)
		k := copy(pkt[eagerHeader:], r.buf)
		p.out.Commit(eagerHeader + k)
		p.count.msgs.Inc()
		p.count.bytes.Add(uint64(total))
		r.sent = k
		r.state = stPushing
	}
	for r.sent < total {
		pkt := p.out.Reserve(fragHeader + min(total-r.sent, max-fragHeader))
		if pkt == nil {
			return n, false
		}
		pkt[offType] = pktFrag
		k := copy(pkt[fragHeader:], r.buf[r.sent:])
		p.out.Commit(fragHeader + k)
		r.sent += k
		n++
	}
	p.sendq.pop()
	if r.mode == Synchronous && !r.finned {
		r.state = stAwaitFin
	} else {
		ep.complete(r, nil)
	}
	return n, true
}

// pushData streams a rendezvous send's data after cts and reports whether
// all of it is on the link.
func (ep *Endpoint) pushData(p *peer, r *Request) (int, bool) {
	n := 0
	max := p.out.MaxPacket()
	for r.sent < len(r.buf) {
		pkt := p.out.Reserve(dataHeader + min(len(r.buf)-r.sent, max-dataHeader))
		if pkt == nil {
			return n, false
		}
		putIDs(pkt[:dataHeader], pktData, 0, r.rreq, uint64(r.sent))
		k := copy(pkt[dataHeader:], r.buf[r.sent:])
		p.out.Commit(dataHeader + k)
		r.sent += k
		n++
	}
	p.dataq.pop()
	ep.complete(r, nil)
	return n, true
}

// queueCtl sends a control packet to peer i, now if there is room.
func (ep *Endpoint) queueCtl(i int, c ctlPacket) {
	p := &ep.peers[i]
	if p.dead != nil {
		return
	}
	p.ctl = append(p.ctl, c)
	ep.flush(i)
	if len(p.ctl) > 0 {
		ep.stalled(p)
	}
}

// Cancel asks to withdraw r (MPI_CANCEL). A receive still posted, or a
// send not yet on the link, is cancelled at once; a send the receiver
// holds unmatched is withdrawn by asking it. Either way r completes: Wait
// reports Status.Cancelled if the cancel took effect.
func (r *Request) Cancel() error { return r.cancel(true) }

// cancel is Cancel; reopen says whether a send that has completed is
// still to be withdrawn from its receiver (cancelDone), as MPI's cancel
// wants; a context's (WaitOrCancel) leaves a completed operation be.
func (r *Request) cancel(reopen bool) error {
	ep := r.ep
	ep.lock()
	defer ep.unlock()
	if r.state == stFree {
		return ErrRequest
	}
	switch {
	case r.state == stDone:
		if reopen {
			ep.cancelDone(r)
		}
	case r.state == stPosted:
		ep.m.unpost(r)
		ep.posted.Sub(1)
		r.status.Cancelled = true
		ep.cancelled.Inc()
		ep.complete(r, nil)
	case r.kind == kindSend && r.state == stQueued:
		p := &ep.peers[r.peer]
		p.sendq.remove(r)
		r.status.Cancelled = true
		ep.cancelled.Inc()
		ep.complete(r, nil)
	case r.kind == kindSend && r.state == stAwaitFin && !r.cancelling:
		r.cancelling = true
		ep.queueCtl(r.peer, ctlPacket{typ: pktCancel, a: r.id, ctx: r.ctx, tag: int32(r.tag), sid: r.sid})
	}
	return nil
}

// cancelDone handles Cancel of a send that completed inside the engine
// but that its owner has not yet waited for: its message may still sit
// unmatched at the receiver, which is asked to drop it. The request is
// active again until the answer comes (MPI requires the cancel of Example
// 8.11 of MPI-4.1 to succeed although the data left long ago).
func (ep *Endpoint) cancelDone(r *Request) {
	if r.kind != kindSend || r.err != nil || r.status.Cancelled || r.cancelling {
		return
	}
	if ep.peers[r.peer].dead != nil {
		return
	}
	r.state = stAwaitFin
	r.cancelling = true
	ep.inflight++
	r.Completion.Rearm()
	ep.queueCtl(r.peer, ctlPacket{typ: pktCancel, a: r.id, ctx: r.ctx, tag: int32(r.tag), sid: r.sid})
}

func (ep *Endpoint) String() string { return fmt.Sprintf("rank %d of %d", ep.rank, ep.size) }
