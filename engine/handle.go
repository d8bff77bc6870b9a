package engine

import (
	"fmt"
	"unsafe"
)

// What a packet does when it arrives: handle dispatches on its type (the
// layouts are in wire.go). Eager, short and frag packets make messages
// here: matched to a posted receive, straight into its buffer; unmatched,
// queued unexpected for a receive posted later (recv.go). The rendezvous
// packets are in rendezvous.go, the cancel packets in cancel.go.

// handle processes one packet from peer src.
func (ep *Endpoint) handle(src int, pkt []byte) {
	if ep.shortToPosted(src, pkt) {
		return
	}
	ep.handleAny(src, pkt)
}

// handleAny processes any packet: handle's work beyond the short packet
// for a posted receive, apart so that that case's frame stays small (this
// one's switch spills every argument first).
func (ep *Endpoint) handleAny(src int, pkt []byte) {
	if err := checkPacket(pkt); err != nil {
		ep.malformed.Inc()
		return
	}
	p := &ep.peers[src]
	switch pkt[offType] {
	case pktEager:
		ep.onEager(src, p, pkt)
	case pktShort:
		ep.onShort(src, p, pkt)
	case pktFrag:
		ep.onFrag(p, pkt[fragHeader:])
	case pktRTS:
		ep.onRTS(src, pkt)
	case pktCTS:
		s := ep.sendRequest(src, u64(pkt, ctsSreq), stAwaitFin)
		if s == nil {
			return
		}
		s.rreq, s.sent, s.state = u64(pkt, ctsRreq), 0, stStreaming
		if pkt[offFlags]&flagBulk != 0 && ep.net != nil && ep.net.bulkSend(src, s) {
			return
		}
		p.dataq.push(s)
		ep.markQueued(p)
	case pktData:
		ep.onData(src, pkt)
	case pktCTW:
		ep.onCTW(src, pkt)
	case pktWritten:
		ep.onWritten(src, pkt)
	case pktFin:
		if s := ep.reqs.lookup(u64(pkt, finSreq)); s != nil && s.kind == kindSend && s.peer == src &&
			s.state == stPushing && s.mode == Synchronous && !s.finned {
			// A synchronous eager send whose receiver matched its first
			// packet while the rest still waits for room: it completes
			// once its last packet is out.
			s.finned = true
			return
		}
		s := ep.sendRequest(src, u64(pkt, finSreq), stAwaitFin)
		if s == nil {
			return
		}
		ep.complete(s, nil) // a cancel still out is answered later
	case pktCancel:
		ep.onCancel(src, pkt)
	case pktCancelled:
		ep.onCancelled(src, pkt)
	}
}

// sendRequest returns the send request a control packet from src names,
// or nil (counted as malformed) if no such request waits for it.
func (ep *Endpoint) sendRequest(src int, id uint64, want reqState) *Request {
	s := ep.reqs.lookup(id)
	if s == nil || s.kind != kindSend || s.peer != src || s.state != want {
		ep.malformed.Inc()
		return nil
	}
	return s
}

// maxEagerAccepted bounds the length an eager packet may announce, so that
// a broken peer cannot make this rank allocate without limit. Every rank of
// a job is meant to run with the same engine_eager_limit; the slack allows
// for one that does not.
func maxEagerAccepted() int { return max(4*int(eagerLimit.Get()), 1<<20) }

// onEager takes the first packet of an eager message from src: into the
// matching posted receive, or queued unexpected; frags bring the rest.
func (ep *Endpoint) onEager(src int, p *peer, pkt []byte) {
	if p.rx.req != nil || p.rx.uq != nil {
		// The previous message's fragments never came: the peer broke
		// the protocol. Drop the partial message.
		ep.malformed.Inc()
		ep.abandonRx(p)
	}
	ctx, tag, length := u32(pkt, eagerCtx), int32(u32(pkt, eagerTag)), int(u32(pkt, eagerLen))
	payload := pkt[eagerHeader:]
	if len(payload) > length || length > maxEagerAccepted() {
		ep.malformed.Inc()
		return
	}
	ep.eager(src, p, ctx, tag, length, pkt[offFlags]&flagSync != 0, u64(pkt, eagerSreq), false, payload)
}

// onShort takes a whole eager message in a short packet.
func (ep *Endpoint) onShort(src int, p *peer, pkt []byte) {
	if p.rx.req != nil || p.rx.uq != nil {
		ep.malformed.Inc()
		ep.abandonRx(p)
	}
	payload := pkt[shortHeader:]
	if len(payload) > maxEagerAccepted() {
		ep.malformed.Inc()
		return
	}
	ep.eager(src, p, u32(pkt, shortCtx), int32(u32(pkt, shortTag)), len(payload), false, uint64(u32(pkt, shortID)), true, payload)
}

// shortToPosted delivers a short packet from src into the receive posted
// for it, in the case that makes up a window of small messages: no
// wildcard receive posted, no message of src half arrived, a receive of
// the packet's exact key waiting with room for it. It reports false, having
// done nothing, in every other case, which eager handles. It is eager's
// work for that case alone, in one function: at the receiving end of a
// message-rate loop every instruction of the packet's way counts.
func (ep *Endpoint) shortToPosted(src int, pkt []byte) bool {
	m := &ep.m
	if len(pkt) < shortHeader || pkt[offType] != pktShort || m.nposted == 0 || m.nwild != 0 {
		return false
	}
	p := &ep.peers[src]
	if p.rx.req != nil || p.rx.uq != nil {
		return false
	}
	tag := int32(u32(pkt, shortTag))
	l := m.pcache.last.l // the list last looked up, in line: a window's packets share one key
	if l == nil || m.pcache.last.k != (key{u32(pkt, shortCtx), int32(src), tag}) {
		if l = ep.postedFor(src, pkt); l == nil {
			return false
		}
	}
	if l.head == nil {
		return false
	}
	r := l.head
	payload := pkt[shortHeader:]
	if len(payload) > len(r.buf) {
		return false
	}
	// unpost, for the head of a list of exact keys
	if l.head = r.qnext; l.head != nil {
		l.head.qprev = nil
	} else {
		l.tail = nil
		if len(m.posted) > m.maxLists {
			m.unlist(l, r)
		}
	}
	r.list, r.qnext = nil, nil
	m.nposted--
	ep.posted.Sub(1)
	n := copyShort(r.buf, payload)
	r.sent = n
	r.status.Source, r.status.Tag, r.status.Count = src, int(tag), n
	if r.release == nil && !r.freed && ep.serial {
		// complete's usual case, in line
		r.state = stDone
		ep.inflight--
		r.Completion.MarkDoneLocal() // serial: no one else looks
		return true
	}
	ep.complete(r, nil)
	return true
}

// postedFor returns the list of receives posted for the key of src's
// packet pkt, nil if none: shortToPosted's lookup past the list last
// looked up, out of line so that the key is not kept across it.
//
//go:noinline
func (ep *Endpoint) postedFor(src int, pkt []byte) *reqList {
	return ep.m.pcache.get(ep.m.posted, key{u32(pkt, shortCtx), int32(src), int32(u32(pkt, shortTag))})
}

// copyShort copies src to dst, which has room for it, and returns its
// length: a short message's payload of up to 16 bytes with overlapping
// moves instead of a call to memmove.
func copyShort(dst, src []byte) int {
	n := len(src)
	if n > 16 || len(dst) < n {
		return copy(dst, src)
	}
	if n >= 8 {
		*(*[8]byte)(dst) = [8]byte(src)
		*(*[8]byte)(dst[n-8:]) = [8]byte(src[n-8:])
		return n
	}
	moveTiny(unsafe.Pointer(unsafe.SliceData(dst)), unsafe.Pointer(unsafe.SliceData(src)), n)
	return n
}

// moveTiny copies n bytes, fewer than 8, from src to dst: with two
// overlapping moves of half or a quarter of a word, or one byte, where
// memmove's call costs some 20 instructions more. Out of line, so that
// it costs pollShort's loop no registers.
//
//go:noinline
func moveTiny(dst, src unsafe.Pointer, n int) {
	switch {
	case n >= 4:
		*(*[4]byte)(dst) = *(*[4]byte)(src)
		*(*[4]byte)(unsafe.Add(dst, n-4)) = *(*[4]byte)(unsafe.Add(src, n-4))
	case n >= 2:
		*(*[2]byte)(dst) = *(*[2]byte)(src)
		*(*[2]byte)(unsafe.Add(dst, n-2)) = *(*[2]byte)(unsafe.Add(src, n-2))
	case n == 1:
		*(*byte)(dst) = *(*byte)(src)
	}
}

// eager matches the first packet of an eager message of length bytes, or
// queues it unexpected. short says sreq is a short id.
func (ep *Endpoint) eager(src int, p *peer, ctx uint32, tag int32, length int, sync bool, sreq uint64, short bool, payload []byte) {
	if r := ep.m.matchPosted(ctx, int32(src), tag); r != nil {
		ep.posted.Sub(1)
		r.status.Source, r.status.Tag = src, int(tag)
		if sync {
			ep.queueCtl(src, ctlPacket{typ: pktFin, a: sreq})
		}
		r.sent = copy(r.buf, payload)
		if len(payload) == length {
			ep.finishRecv(r, length)
			return
		}
		r.state = stReceiving
		p.rx = rxState{req: r, off: len(payload), total: length}
		return
	}
	u := ep.unexpected(ctx, src, tag)
	u.kind, u.sync, u.sreq, u.short, u.length = uqEager, sync, sreq, short, length
	u.data = ep.pool.get(length)
	u.got = copy(u.data, payload)
	if u.got < length {
		p.rx = rxState{uq: u, off: u.got, total: length}
	}
}

// finishRecv completes a receive whose message of length bytes has fully
// arrived (r.sent bytes of it stored).
func (ep *Endpoint) finishRecv(r *Request, length int) {
	r.status.Count = r.sent
	var err error
	if length > len(r.buf) {
		err = truncated(length, len(r.buf))
	}
	ep.complete(r, err)
}

// onFrag takes the next part of the eager message p is in the middle of;
// a frag that belongs to no message, or overruns it, is malformed and ends
// the message.
func (ep *Endpoint) onFrag(p *peer, payload []byte) {
	rx := &p.rx
	if (rx.req == nil && rx.uq == nil) || rx.off+len(payload) > rx.total {
		ep.malformed.Inc()
		ep.abandonRx(p)
		return
	}
	if r := rx.req; r != nil {
		if rx.off < len(r.buf) {
			r.sent += copy(r.buf[rx.off:], payload)
		}
		rx.off += len(payload)
		if total := rx.total; rx.off == total {
			p.rx = rxState{}
			ep.finishRecv(r, total)
		}
		return
	}
	u := rx.uq
	u.got += copy(u.data[u.got:u.length], payload)
	rx.off = u.got
	if u.got == u.length {
		p.rx = rxState{}
		if r := u.waiter; r != nil {
			ep.finishFromUnexpected(r, u)
		}
	}
}

// abandonRx drops the eager message p was in the middle of.
func (ep *Endpoint) abandonRx(p *peer) {
	if r := p.rx.req; r != nil {
		ep.complete(r, fmt.Errorf("%w: message from rank %d ended early", ErrMalformed, r.status.Source))
	}
	if u := p.rx.uq; u != nil {
		err := fmt.Errorf("%w: message from rank %d ended early", ErrMalformed, u.src)
		if r := u.waiter; r != nil {
			r.uq = nil
			ep.complete(r, err)
		}
		ep.endPartial(u, err)
	}
	p.rx = rxState{}
}
