package engine

import (
	"errors"
	"math"
	"unsafe"

	"github.com/tachyon-hpc/tachyon/asm"
	"github.com/tachyon-hpc/tachyon/progress"
	"github.com/tachyon-hpc/tachyon/rings"
)

// The poll loop: how packets come in. Poll takes each peer's packets from
// its inbox in order (pollLocked: a ring's short packets a batch at a time
// in pollShort, large ones in pollLarge; the network peers with packets
// ready in pollNet) and hands each to handle (handle.go); then it pushes
// what waits for room on the links. NextDue and
// BeforePark tell the progress engine when a parked rank must look again.

// Poll is the endpoint's Poller: it drains every inbox, then pushes what
// waits for room on the links. A goroutine posting an operation holds the
// endpoint for a moment; Poll then returns at once, and the next one
// catches up.
func (ep *Endpoint) Poll() int {
	if !ep.tryLock() {
		return 0
	}
	if ep.closed {
		// A poll already under way when Close unregistered the
		// endpoint: its rings may be unmapped.
		ep.unlock()
		return 0
	}
	n := ep.pollLocked()
	ep.unlock()
	return n
}

// pollLocked takes in what every peer sent. The packets it handles are
// released (their ring space zeroed and given back) only at the next poll
// of their peer: released at once, the zeroing's stores sit in the store
// buffer ahead of those of an answer the handling leads to (a ping-pong's
// echo), and the answer leaves later (figures in docs/engine.md, the
// message path's rules). Large packets with more behind them are the
// exception (pollLarge).
//
// It stays out of line: a profile that inlined it into Poll left the
// reader's Next and handle out of line instead, and the receiving rank
// ran more instructions a message (docs/engine.md).
//
//go:noinline
func (ep *Endpoint) pollLocked() int {
	asm.StoreRelaxed64(&ep.polls, ep.polls+1) // relaxed: a network keeper reads it unlocked
	n := 0
	if ep.net != nil {
		n = ep.net.pump()
	}
	batch, large := int(pollBatch.Get()), largePacket()
	for _, i := range ep.scan {
		p := &ep.peers[i]
		ep.releaseHeld(p)
		var k, base int
		var err error
		if rd := p.recs; rd != nil {
			// One record at a time: handled while the writer still
			// writes the next (rings.RecordReader.Next).
			for { // Next stops at batch: nothing is released here
				var pkt []byte
				if ep.serial {
					k, pkt = ep.pollShort(i, rd, k, batch)
				}
				if pkt == nil {
					var e error
					if pkt, e = rd.Next(batch); pkt == nil {
						if e != nil && !errors.Is(e, rings.ErrClosed) {
							err = e // ErrClosed: this rank closed the inbox; nothing malformed
						}
						break
					}
				}
				if len(pkt) >= large {
					k, base, err = ep.pollLarge(i, rd, pkt, k, batch, large)
					break
				}
				ep.handle(i, pkt)
				k++
			}
			if k > base {
				p.held = k - base
			}
			n += k
		} else {
			k, err = p.in.Peek(batch)
			for j := 0; j < k; j++ {
				ep.handle(i, p.in.Packet(j))
			}
			if k > 0 {
				p.held = k
				n += k
			}
		}
		if err != nil {
			ep.malformed.Inc()
		}
	}
	if ep.net != nil && len(ep.net.ready) > 0 {
		n += ep.pollNet(batch)
	}
	if n == 0 {
		ep.warmNext()
	}
	if ep.outq > 0 {
		n += ep.flushAll()
	}
	if ep.net != nil {
		if ep.net.bulk != nil && ep.net.bulk.active > 0 {
			n += ep.pollBulk()
		}
		ep.net.service()
	}
	if n > 0 || ep.inflight == 0 && ep.probing == 0 {
		ep.idle = 0
		return n
	}
	// Nothing to do: the progress engine's recent clock reading says
	// whether to look at the peers' health.
	now := ep.prog.Coarse()
	if ep.idle == 0 {
		ep.idle = int64(now)
		return 0
	}
	if now-uint64(ep.idle) >= ep.checkCounts() {
		ep.idle = int64(now)
		ep.checkPeers()
	}
	return 0
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
// the compiler's budget). A copy that earns its place: docs/engine.md,
// "Fast paths", counts what it saves.
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
			u64(pkt, offType) != h0 || u32(pkt, shortTag) != tag {
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

// pollLarge is pollLocked's loop over peer i's record ring from a large
// packet on, the k+1st of the poll (engine_poll_release_bytes): when
// another packet is ready behind a large one, what was handled is given
// back at once, so that the writer refills it while the next is copied
// out; the last waits for the next poll, off an answer's path. It returns
// the packets handled and how many of them it gave back, and the error of
// a malformed record. Out of line, so that the loop of small packets
// keeps its registers.
func (ep *Endpoint) pollLarge(i int, rd *rings.RecordReader, pkt []byte, k, batch, large int) (int, int, error) {
	base := 0
	for {
		ep.handle(i, pkt)
		if k++; k >= batch {
			return k, base, nil
		}
		if len(pkt) >= large && rd.Ready() {
			rd.Release(k - base)
			base = k
			ep.peers[i].roomFreed()
		}
		var e error
		if pkt, e = rd.Next(batch); pkt == nil {
			if e != nil && !errors.Is(e, rings.ErrClosed) {
				return k, base, e
			}
			return k, base, nil
		}
	}
}

// pollNet is pollLocked's loop over the network peers: only those with
// packets ready in order, or handled by the last poll and not yet
// released (the device's ready list, network.go), however many network
// peers the rank has. A peer leaves the list once it has neither.
func (ep *Endpoint) pollNet(batch int) int {
	d := ep.net
	n := 0
	for j := 0; j < len(d.ready); {
		c := d.ready[j]
		i := int(c.rank)
		p := &ep.peers[i]
		ep.releaseHeld(p)
		k, err := c.Peek(batch)
		for m := 0; m < k; m++ {
			ep.handle(i, c.Packet(m))
		}
		if k > 0 {
			p.held = k
			n += k
		}
		if err != nil {
			ep.malformed.Inc()
		}
		if p.held == 0 && c.dlvNxt == c.rcvNxt {
			d.unready(j)
			continue
		}
		j++
	}
	return n
}

// largePacket returns engine_poll_release_bytes, with 0 (never) as the
// largest int.
func largePacket() int {
	if b := int(pollRelease.Get()); b > 0 {
		return b
	}
	return math.MaxInt
}

// warmNext warms one record link that streamed recently, the next after
// the one it warmed last (recordLink.warm): one a poll, so that a rank
// that streamed to many peers does not make every poll of its wait that
// many times longer. It looks at the record links only (routs), not at
// every peer.
func (ep *Endpoint) warmNext() {
	for k := range ep.routs {
		j := ep.warmAt + k
		if j >= len(ep.routs) {
			j -= len(ep.routs)
		}
		if l := ep.peers[ep.routs[j]].rout; l.streamed {
			if c := l.warm(ep.polls); c > 0 {
				ep.warmed.Add(uint64(c))
				ep.warmAt = j + 1
				if ep.warmAt == len(ep.routs) {
					ep.warmAt = 0
				}
				return
			}
		}
	}
}

// checkCounts returns engine_check_interval in clock counts, converted
// once per value of the variable rather than at every empty poll.
func (ep *Endpoint) checkCounts() uint64 {
	if d := checkInterval.Get(); d != ep.checkD {
		ep.checkD, ep.checkC = d, progress.SecondsToCounts(d.Seconds())
	}
	return ep.checkC
}

// releaseHeld releases the packets of p that the last poll handled.
func (ep *Endpoint) releaseHeld(p *peer) {
	if p.held > 0 {
		p.in.Release(p.held)
		p.held = 0
		p.roomFreed()
	}
}

// roomFreed wakes p's rank, after a Release of its packets, if it parked
// waiting for room on its link to this rank (Link.WantRoom, BeforePark).
// Nothing else would: a writer waiting for room gets no packet from the
// reader, and without this it would sleep until progress_park_max, a
// window of messages taking that long instead of microseconds once the
// receiver paused long enough for the sender to park (docs/engine.md).
func (p *peer) roomFreed() {
	progress.WakeFence() // the Release before the check (Inbox.RoomWanted)
	if rd := p.recs; rd != nil {
		if !rd.RoomWanted() {
			return
		}
	} else if !p.in.RoomWanted() {
		return
	}
	p.out.Wake()
	pvRoomWakes.Add(1)
}

// NextDue is the endpoint's progress.Deadliner: a rank with peers on the
// network must look at its link again by the device's next timer, and
// within engine_net_poll_max, since no doorbell announces a frame.
func (ep *Endpoint) NextDue() (uint64, bool) {
	if ep.net == nil {
		return 0, false
	}
	return ep.net.nextDue()
}

// BeforePark is the endpoint's progress.Parker: before a goroutine parks,
// every link with packets waiting for room asks its reader to wake this
// rank once it frees some (Link.WantRoom).
func (ep *Endpoint) BeforePark() {
	ep.lock()
	if ep.outq > 0 && !ep.closed {
		for _, i := range ep.qpeers {
			if p := &ep.peers[i]; p.queued && p.dead == nil {
				p.out.WantRoom()
				ep.roomWaits.Inc()
			}
		}
	}
	ep.unlock()
}
