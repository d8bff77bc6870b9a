package engine

import (
	"errors"
	"fmt"
	"math"
	"unsafe"

	"github.com/tachyon-hpc/tachyon/asm"
	"github.com/tachyon-hpc/tachyon/rings"
)

// Inbound flow of one message:
//
//  1. Poll takes packets from each peer's inbox in order and hands them to
//     handle.
//  2. An eager or rts packet is matched against the posted receives
//     (matchPosted). Matched, its bytes go straight into the receive's
//     buffer; unmatched, it joins the unexpected queues, an eager
//     message's bytes copied into a pooled buffer.
//  3. Frag packets complete the eager message their peer is in the middle
//     of; data packets fill the rendezvous receive they name.
//  4. A receive posted later takes the earliest unexpected message it
//     matches (findUnexpected), or waits in the posted queue.
//  5. A rendezvous receive reads the sender's buffer directly where the
//     transport can (then sends fin), or sends cts and waits for data.

// Irecv posts a receive into buf from rank src (or AnySource) with tag (or
// AnyTag) in context ctx.
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
					pvMalformed.Add(1)
				}
				return Status{}, false, nil
			}
			ep.warmNext() // as an empty poll does
			continue
		}
		p.held++
		if len(pkt) >= shortHeader && pkt[0] == pktShort && u32(pkt, 4) == ctx && u32(pkt, 8) == uint32(tag) &&
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

func truncated(msg, buf int) error {
	return fmt.Errorf("%w: %d-byte message, %d-byte buffer", ErrTruncate, msg, buf)
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
	ep.prog.WaitUntil(func() bool {
		var ok bool
		st, ok, err = ep.probe(src, tag, ctx)
		if ok || err != nil {
			return true
		}
		if src == AnySource && ep.size > 1 && ep.allPeersGone() {
			err = fmt.Errorf("%w: every other rank is gone", ErrPeerDead)
			return true
		}
		return false
	})
	return st, err
}

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
		pvMalformed.Add(1)
		return
	}
	p := &ep.peers[src]
	switch pkt[0] {
	case pktEager:
		ep.onEager(src, p, pkt)
	case pktShort:
		ep.onShort(src, p, pkt)
	case pktFrag:
		ep.onFrag(p, pkt[fragHeader:])
	case pktRTS:
		ep.onRTS(src, pkt)
	case pktCTS:
		s := ep.sendRequest(src, u64(pkt, 8), stAwaitFin)
		if s == nil {
			return
		}
		s.rreq, s.sent, s.state = u64(pkt, 16), 0, stStreaming
		if pkt[1]&flagBulk != 0 && ep.net != nil && ep.net.bulkSend(src, s) {
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
		if s := ep.reqs.lookup(u64(pkt, 8)); s != nil && s.kind == kindSend && s.peer == src &&
			s.state == stPushing && s.mode == Synchronous && !s.finned {
			// A synchronous eager send whose receiver matched its first
			// packet while the rest still waits for room: it completes
			// once its last packet is out.
			s.finned = true
			return
		}
		s := ep.sendRequest(src, u64(pkt, 8), stAwaitFin)
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
		pvMalformed.Add(1)
		return nil
	}
	return s
}

// maxEagerAccepted bounds the length an eager packet may announce, so that
// a broken peer cannot make this rank allocate without limit. Every rank of
// a job is meant to run with the same engine_eager_limit; the slack allows
// for one that does not.
func maxEagerAccepted() int { return max(4*int(eagerLimit.Get()), 1<<20) }

func (ep *Endpoint) onEager(src int, p *peer, pkt []byte) {
	if p.rx.req != nil || p.rx.uq != nil {
		// The previous message's fragments never came: the peer broke
		// the protocol. Drop the partial message.
		pvMalformed.Add(1)
		ep.abandonRx(p)
	}
	ctx, tag, length := u32(pkt, 4), int32(u32(pkt, 8)), int(u32(pkt, 12))
	payload := pkt[eagerHeader:]
	if len(payload) > length || length > maxEagerAccepted() {
		pvMalformed.Add(1)
		return
	}
	ep.eager(src, p, ctx, tag, length, pkt[1]&flagSync != 0, u64(pkt, 16), false, payload)
}

// onShort takes a whole eager message in a short packet.
func (ep *Endpoint) onShort(src int, p *peer, pkt []byte) {
	if p.rx.req != nil || p.rx.uq != nil {
		pvMalformed.Add(1)
		ep.abandonRx(p)
	}
	payload := pkt[shortHeader:]
	if len(payload) > maxEagerAccepted() {
		pvMalformed.Add(1)
		return
	}
	ep.eager(src, p, u32(pkt, 4), int32(u32(pkt, 8)), len(payload), false, uint64(u32(pkt, 12)), true, payload)
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
	if len(pkt) < shortHeader || pkt[0] != pktShort || m.nposted == 0 || m.nwild != 0 {
		return false
	}
	p := &ep.peers[src]
	if p.rx.req != nil || p.rx.uq != nil {
		return false
	}
	tag := int32(u32(pkt, 8))
	l := m.pcache.last.l // the list last looked up, in line: a window's packets share one key
	if l == nil || m.pcache.last.k != (key{u32(pkt, 4), int32(src), tag}) {
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

// pollShort is pollLocked's loop over peer src's record ring, on a
// serial endpoint, for the packets of a window of small messages: short
// ones of up to 16 bytes, ready, for the receive posted first of the key
// last looked up while more are posted behind it, completed in line. It
// is shortToPosted's work for that case, without a call, so that the
// loop's values stay in registers (the calls of the other cases in
// pollLocked's loop cost some 17 stack stores and loads a packet). It
// returns k plus the packets it handled, and the packet it took from the
// ring but did not handle, or nil if it stopped at one it did not take
// (nothing ready, padding, a malformed record, batch reached: rd.Next's
// to say) or took none because the case does not hold. Its ring reads go
// in line only with the profile (bench/default.pgo; NextReady is over
// the compiler's budget).
//
//go:noinline
func (ep *Endpoint) pollShort(src int, rd *rings.RecordReader, k, batch int) (int, []byte) {
	// What the loop does not change, checked once: no wildcard receive, a
	// list last looked up for src, and a packet's first words (h0, tag).
	// The loop then holds fewer values, in registers; the counts drop by
	// k-k0 at the end (shortDone). (A message src is in the middle of
	// goes on in frag or data packets, never short ones: wire.go.)
	m, k0 := &ep.m, k
	l, h0, tag := m.pcache.last.l, pktShort|uint64(m.pcache.last.k.ctx)<<32, uint32(m.pcache.last.k.tag)
	if m.nwild != 0 || l == nil || m.pcache.last.k.src != int32(src) {
		return k, nil
	}
	for ; ; k++ {
		pkt := rd.NextReady(batch)
		// None (nil) fails the length check, and goes back as nil.
		if len(pkt) < shortHeader || len(pkt) > shortHeader+16 || // the type, its three zero bytes, the context; the tag
			u64(pkt, 0) != h0 || u32(pkt, 8) != tag {
			return ep.shortDone(k, k0, pkt)
		}
		// A receive posted first with more behind it: the list keeps
		// one, so nothing here drops it (shortToPosted may).
		r := l.head
		n := len(pkt) - shortHeader // the payload's length, up to 16 bytes
		if r == nil || r.qnext == nil || n > len(r.buf) || r.freed {
			return ep.shortDone(k, k0, pkt)
		}
		dst, from := unsafe.Pointer(unsafe.SliceData(r.buf)), unsafe.Add(unsafe.Pointer(unsafe.SliceData(pkt)), shortHeader)
		l.head, r.qnext.qprev = r.qnext, nil
		r.list, r.qnext = nil, nil
		if n >= 8 { // two overlapping word moves; no slices to make
			*(*[8]byte)(dst) = *(*[8]byte)(from)
			*(*[8]byte)(unsafe.Add(dst, n-8)) = *(*[8]byte)(unsafe.Add(from, n-8))
		} else {
			moveTiny(dst, from, n)
		}
		r.status.Source, r.status.Tag, r.status.Count = src, int(int32(tag)), n
		r.state = stDone
		r.Completion.MarkDoneLocal()
	}
}

// shortDone ends pollShort: the k-k0 receives it completed are no longer
// posted nor pending, counted once for the whole run. It returns k and pkt.
func (ep *Endpoint) shortDone(k, k0 int, pkt []byte) (int, []byte) {
	n := k - k0
	ep.m.nposted -= n
	ep.inflight -= n
	ep.posted.Sub(int64(n))
	return k, pkt
}

// postedFor returns the list of receives posted for the key of src's
// packet pkt, nil if none: shortToPosted's lookup past the list last
// looked up, out of line so that the key is not kept across it.
//
//go:noinline
func (ep *Endpoint) postedFor(src int, pkt []byte) *reqList {
	return ep.m.pcache.get(ep.m.posted, key{u32(pkt, 4), int32(src), int32(u32(pkt, 8))})
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

func (ep *Endpoint) onFrag(p *peer, payload []byte) {
	rx := &p.rx
	if (rx.req == nil && rx.uq == nil) || rx.off+len(payload) > rx.total {
		pvMalformed.Add(1)
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
		if r := u.waiter; r != nil {
			r.uq = nil
			ep.complete(r, fmt.Errorf("%w: message from rank %d ended early", ErrMalformed, r.status.Source))
		}
		ep.dropUnexpected(u)
	}
	p.rx = rxState{}
}

func (ep *Endpoint) onRTS(src int, pkt []byte) {
	ctx, tag := u32(pkt, 4), int32(u32(pkt, 8))
	length, sreq, addr := u64(pkt, 16), u64(pkt, 24), u64(pkt, 32)
	if length > 1<<62 {
		pvMalformed.Add(1)
		return
	}
	sync := pkt[1]&flagSync != 0
	if r := ep.m.matchPosted(ctx, int32(src), tag); r != nil {
		ep.posted.Sub(1)
		r.status.Source, r.status.Tag = src, int(tag)
		ep.startRendezvous(r, src, int(length), sreq, addr, sync)
		return
	}
	u := ep.unexpected(ctx, src, tag)
	u.kind, u.sync, u.sreq, u.addr, u.length = uqRTS, sync, sreq, addr, int(length)
}

// startRendezvous moves a matched rendezvous message into r: directly
// from the sender's buffer if the transport can, else by asking for data.
func (ep *Endpoint) startRendezvous(r *Request, src, length int, sreq, addr uint64, sync bool) {
	r.state = stReceiving
	r.total, r.got = length, 0
	n := min(length, len(r.buf))
	p := &ep.peers[src]
	queued := ep.stillReceiving(src, p.rndv)
	p.rndv = r.id
	if ep.reader != nil {
		if at := ep.reader.splitAt(src, n); at < n && (queued || splitLone.Get()) {
			r.rreq, r.saddr = sreq, addr
			ep.startSplit(r, src, n, at)
			return
		}
		if err := ep.reader.readRemote(src, sreq, addr, r.buf[:n]); err == nil {
			r.sent = n
			ep.queueCtl(src, ctlPacket{typ: pktFin, a: sreq})
			ep.finishRecv(r, length)
			return
		} else if rndvMode.Get() == "cma" {
			ep.queueCtl(src, ctlPacket{typ: pktFin, a: sreq})
			ep.complete(r, fmt.Errorf("%w: reading rank %d's buffer: %v", ErrPeerDead, src, err))
			return
		}
	}
	pvPipelined.Add(1)
	r.sent = 0
	var flags byte
	if ep.net != nil && ep.net.bulkRecv(src, r, length) {
		flags = flagBulk
	}
	ep.queueCtl(src, ctlPacket{typ: pktCTS, flags: flags, a: sreq, b: r.id})
}

// stillReceiving reports whether the rendezvous receive id from src is
// still receiving: then a message that comes after it is split, while a
// lone one streams, which has the lower latency (engine_rndv_split_lone).
func (ep *Endpoint) stillReceiving(src int, id uint64) bool {
	q := ep.reqs.lookup(id)
	return q != nil && q.kind == kindRecv && q.state == stReceiving && q.status.Source == src
}

// startSplit copies a matched rendezvous message, of which n bytes fit
// in r, in two parts at once: it asks the sender to write the bytes from
// at on (ctw), then reads those before at itself. r completes when the
// sender's written comes.
func (ep *Endpoint) startSplit(r *Request, src, n, at int) {
	ep.queueCtl(src, ctlPacket{typ: pktCTW, a: r.rreq, b: r.id, c: uint64(at), d: uint64(n - at),
		e: uint64(uintptr(unsafe.Pointer(&r.buf[at])))})
	if len(ep.woken) > 0 {
		ep.wake() // now, so that the sender copies while this rank does
	}
	r.splitAt = at
	if err := ep.reader.readPart(src, r.saddr, r.buf[:at]); err != nil {
		r.split = splitDropped
		ep.streamRest(r, src)
		return
	}
	r.split = splitWaiting
}

// onWritten completes a split receive once the sender has written its
// part, or gets that part another way if the sender could not.
func (ep *Endpoint) onWritten(src int, pkt []byte) {
	r := ep.reqs.lookup(u64(pkt, 8))
	if r == nil || r.kind != kindRecv || r.state != stReceiving || r.status.Source != src || r.split == splitNone {
		pvMalformed.Add(1)
		return
	}
	if r.split == splitDropped {
		r.split = splitNone
		return
	}
	r.split = splitNone
	n := min(r.total, len(r.buf))
	if pkt[1] != 1 {
		if err := ep.reader.readPart(src, r.saddr+uint64(r.splitAt), r.buf[r.splitAt:n]); err != nil {
			ep.streamRest(r, src)
			return
		}
	}
	pvSplit.Add(1)
	r.sent = n
	ep.queueCtl(src, ctlPacket{typ: pktFin, a: r.rreq})
	ep.finishRecv(r, r.total)
}

// streamRest gives up copying r across and asks the sender, still waiting
// for fin, to stream the whole message through the rings. What either
// side copied already is overwritten with the same bytes.
func (ep *Endpoint) streamRest(r *Request, src int) {
	pvPipelined.Add(1)
	r.got, r.sent = 0, 0
	ep.queueCtl(src, ctlPacket{typ: pktCTS, a: r.rreq, b: r.id})
}

// onCTW writes the part of a rendezvous message its receiver asked for
// into the receiver's buffer and answers written, saying whether it could.
func (ep *Endpoint) onCTW(src int, pkt []byte) {
	s := ep.sendRequest(src, u64(pkt, 8), stAwaitFin)
	if s == nil {
		return
	}
	rreq, off, n, addr := u64(pkt, 16), u64(pkt, 24), u64(pkt, 32), u64(pkt, 40)
	var ok byte
	switch {
	case off > uint64(len(s.buf)) || n > uint64(len(s.buf))-off:
		pvMalformed.Add(1) // answered all the same: the receiver reads it
	case ep.reader != nil && ep.reader.writeRemote(src, addr, s.buf[off:off+n]) == nil:
		ok = 1
	}
	ep.queueCtl(src, ctlPacket{typ: pktWritten, flags: ok, a: rreq, b: n})
}

func (ep *Endpoint) onData(src int, pkt []byte) {
	r := ep.reqs.lookup(u64(pkt, 8))
	off := u64(pkt, 16)
	payload := pkt[dataHeader:]
	if r == nil || r.kind != kindRecv || r.state != stReceiving || r.status.Source != src || r.uq != nil ||
		off > uint64(r.total) || uint64(len(payload)) > uint64(r.total)-off {
		pvMalformed.Add(1)
		return
	}
	length := r.total
	if int(off) < len(r.buf) {
		copy(r.buf[off:], payload)
	}
	r.got += len(payload)
	if r.got == length {
		if r.bulk {
			ep.net.bulkDone(src, r) // the sender could not reach the lane
		}
		r.sent = min(length, len(r.buf))
		ep.finishRecv(r, length)
	}
}

func (ep *Endpoint) onCancel(src int, pkt []byte) {
	ctx, sreq, tag, sid := u32(pkt, 4), u64(pkt, 8), int32(u32(pkt, 16)), u32(pkt, 20)
	var ok byte
	if l := ep.m.uq[key{ctx, int32(src), tag}]; l != nil {
		for u := l.head; u != nil; u = u.links[byExact].next {
			id := sreq
			if u.short {
				id = uint64(sid)
			}
			if u.sreq == id && id != 0 && (u.kind == uqRTS || u.got == u.length) && u.waiter == nil {
				ep.dropUnexpected(u)
				ok = 1
				break
			}
		}
	}
	ep.queueCtl(src, ctlPacket{typ: pktCancelled, flags: ok, a: sreq})
}

func (ep *Endpoint) onCancelled(src int, pkt []byte) {
	s := ep.reqs.lookup(u64(pkt, 8))
	if s == nil || s.kind != kindSend || s.peer != src || !s.cancelling {
		pvMalformed.Add(1)
		return
	}
	s.cancelling = false
	switch {
	case pkt[1] == 1 && s.state != stDone:
		s.status.Cancelled = true
		pvCancelled.Add(1)
		ep.complete(s, nil)
	case s.state == stDone:
		if s.freed {
			ep.reqs.put(s)
		}
	case s.sent == len(s.buf) && s.mode != Synchronous:
		// An eager send the receiver had already matched: it stands.
		ep.complete(s, nil)
	}
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
