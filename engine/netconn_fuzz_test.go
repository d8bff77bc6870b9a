package engine

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/tachyon-hpc/tachyon/internal/testcvar"
	"github.com/tachyon-hpc/tachyon/nic"
)

// The connection fuzzer's world: this rank (1, incarnation fzEpoch) and
// its one network peer (0, incarnation fzPeerEpoch) over a memLink of
// fzFrames frames of fzMTU bytes.
const (
	fzCookie    = 0x7ac4_0f0f_5eed_0001
	fzEpoch     = 7
	fzPeerEpoch = 9
	fzWindow    = 16
	fzMTU       = 256
	fzFrames    = 4*fzWindow + 16
	fzTag       = 6 // a peer packet's tag: seq (u32), index (u8), packets in its frame (u8)
)

// fzReader hands out the fuzzer's bytes; past the end, zeros.
type fzReader struct{ b []byte }

func (r *fzReader) byte() byte {
	if len(r.b) == 0 {
		return 0
	}
	x := r.b[0]
	r.b = r.b[1:]
	return x
}

func (r *fzReader) u16() uint16 { return uint16(r.byte()) | uint16(r.byte())<<8 }
func (r *fzReader) u32() uint32 { return uint32(r.u16()) | uint32(r.u16())<<16 }

func (r *fzReader) bytes(n int) []byte {
	n = min(n, len(r.b))
	b := r.b[:n]
	r.b = r.b[n:]
	return b
}

// fzFrame returns a frame of header h (its Length set) and payload.
func fzFrame(h nic.Header, payload []byte) []byte {
	b := make([]byte, nic.HeaderLen+len(payload))
	h.Length = uint16(len(payload))
	h.Put(b)
	copy(b[nic.HeaderLen:], payload)
	return b
}

// fzFill is the byte at i of packet p: what the receiver checks.
func fzFill(seed, i int) byte { return byte(seed*7 + i*13 + 1) }

// fzConn drives one netConn with frames from the fuzzer and checks its
// invariants after every step.
type fzConn struct {
	t    *testing.T
	l    *memLink
	d    *netDev
	c    *netConn
	seen int // frames of l.sent checked

	injected map[uint32]bool // data seqs the peer sent that reach the connection
	contig   uint32          // the first seq from 0 not in injected
	local    map[uint32][]byte
	sentTop  uint32 // 1 + the highest data seq the link took
	anySent  bool
	lastAck  uint32 // the Ack of the connection's last frame

	closed                 bool // the device is closed
	delivered              bool // a packet was released
	lastSeq                uint32
	lastIdx, lastK         int
	malformed, foreign     uint64
	stale, dupes, outOfWin uint64
}

func newFzConn(t *testing.T) *fzConn {
	l := newMemLink(fzFrames, fzMTU)
	d, err := newNetDev(l, fzCookie, 1, fzEpoch, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := newNetConn(d, 0, 0, fzPeerEpoch, d.clock())
	c.max = fzMTU - nic.HeaderLen - pktLen
	d.conns[0] = c
	d.list = append(d.list, c)
	return &fzConn{t: t, l: l, d: d, c: c, injected: map[uint32]bool{}, local: map[uint32][]byte{}}
}

// header returns a header the connection takes as its peer's.
func (z *fzConn) header(typ nic.Type) nic.Header {
	return nic.Header{Type: typ, Cookie: fzCookie, Src: 0, Dst: 1, Epoch: fzPeerEpoch, Credit: fzWindow}
}

// counters snapshots the device's drop counters.
func (z *fzConn) counters() [5]uint64 {
	d := z.d
	return [5]uint64{d.malformed.Load(), d.foreign.Load(), d.stale.Load(), d.dupes.Load(), d.outOfWindow.Load()}
}

const (
	fzMalformed = iota
	fzForeign
	fzStale
	fzDupes
	fzOutOfWindow
)

var fzCounterNames = [5]string{"malformed", "foreign", "stale", "duplicates", "out of window"}

// inject has the device receive frame b and checks which drop counters
// moved: exactly want (-1: none) for a frame it must drop, and for the
// peer's data frame (data: its payload is well-formed or not) at most one
// of duplicates, out of window and, if the payload is malformed, malformed.
func (z *fzConn) inject(b []byte, want int, data, wellFormed bool) {
	t := z.t
	t.Helper()
	dead := z.c.dead != nil
	before := z.counters()
	z.l.in = append(z.l.in, b)
	z.d.pump()
	z.d.closeTx() // no service follows: the batch pump opened goes now
	if len(z.l.in) != 0 {
		t.Fatalf("the link has no frame to receive into: frames leak (%d free of %d)", len(z.l.free), fzFrames)
	}
	after := z.counters()
	var delta [5]uint64
	for i := range delta {
		delta[i] = after[i] - before[i]
	}
	if !data || dead {
		for i, n := range delta {
			if exp := uint64(0); n != exp && i != want || i == want && n != 1 {
				t.Fatalf("a frame (want %d more, dead %v) moved the counters %v by %v", want, dead, fzCounterNames, delta)
			}
		}
		return
	}
	if delta[fzForeign]+delta[fzStale] != 0 || delta[fzDupes]+delta[fzOutOfWindow]+delta[fzMalformed] > 1 {
		t.Fatalf("a data frame of the peer moved the counters by %v", delta)
	}
	dropped := delta[fzDupes]+delta[fzOutOfWindow] != 0
	if !wellFormed && !dropped && delta[fzMalformed] != 1 {
		t.Fatalf("a malformed data frame taken in was not counted (deltas %v)", delta)
	}
	if wellFormed && delta[fzMalformed] != 0 {
		t.Fatalf("a well-formed data frame counted malformed")
	}
}

// peerData sends the connection a data frame of the peer at seq, its
// packets tagged, corrupted as mode says (0: not).
func (z *fzConn) peerData(r *fzReader, seq uint32, flags nic.Flags, ack, sack uint32, credit uint16, k int, mode byte) {
	var p []byte
	for j := range k {
		n := fzTag + int(r.byte())%48
		pk := make([]byte, pktLen+n)
		binary.LittleEndian.PutUint16(pk, uint16(n))
		binary.LittleEndian.PutUint32(pk[pktLen:], seq)
		pk[pktLen+4], pk[pktLen+5] = byte(j), byte(k)
		for i := fzTag; i < n; i++ {
			pk[pktLen+i] = fzFill(int(seq)+j, i)
		}
		p = append(p, pk...)
	}
	wellFormed := true
	switch {
	case mode == 1:
		p = append(p, 0xee) // a stray byte
		wellFormed = false
	case mode == 2:
		p = append(p, 0, 0) // an empty packet
		wellFormed = false
	case mode == 3 && k > 0:
		binary.LittleEndian.PutUint16(p, uint16(len(p))) // the first packet's length past the payload
		wellFormed = false
	}
	h := z.header(nic.TypeData)
	h.Flags, h.Seq, h.Ack, h.SACK, h.Credit = flags&(nic.FlagAckNow|nic.FlagLast), seq, ack, sack, credit
	if z.c.dead == nil {
		z.injected[seq] = true
		for z.injected[z.contig] {
			z.contig++
		}
	}
	z.inject(fzFrame(h, p), -1, true, wellFormed)
}

// deliver takes up to max ready packets, checks each, and releases the
// first rel of them as the matching layer would.
func (z *fzConn) deliver(max, rel int) {
	t := z.t
	n, err := z.c.Peek(max)
	if err != nil {
		t.Fatal(err)
	}
	if n > max {
		t.Fatalf("Peek(%d) = %d", max, n)
	}
	for i := range n {
		p := z.c.Packet(i)
		if len(p) < fzTag {
			t.Fatalf("packet %d of %d bytes: not one the peer sent", i, len(p))
		}
		seq := binary.LittleEndian.Uint32(p)
		idx, k := int(p[4]), int(p[5])
		for j := fzTag; j < len(p); j++ {
			if p[j] != fzFill(int(seq)+idx, j) {
				t.Fatalf("packet %d (seq %d, index %d) corrupt at byte %d", i, seq, idx, j)
			}
		}
		if !z.injected[seq] || idx >= k {
			t.Fatalf("packet (seq %d, index %d of %d) delivered: never sent", seq, idx, k)
		}
		if i >= rel {
			continue
		}
		switch {
		case z.delivered && seq == z.lastSeq:
			if idx != z.lastIdx+1 {
				t.Fatalf("seq %d: packet %d delivered after %d", seq, idx, z.lastIdx)
			}
		default:
			if idx != 0 {
				t.Fatalf("seq %d delivered from packet %d", seq, idx)
			}
			if z.delivered && (z.lastIdx != z.lastK-1 || !seqLT(z.lastSeq, seq)) {
				t.Fatalf("seq %d delivered after seq %d's packet %d of %d", seq, z.lastSeq, z.lastIdx, z.lastK)
			}
		}
		z.delivered, z.lastSeq, z.lastIdx, z.lastK = true, seq, idx, k
	}
	z.c.Release(min(rel, n))
}

// sendLocal has the connection send a packet of n bytes, if it has room.
func (z *fzConn) sendLocal(n int) {
	b := z.c.Reserve(n)
	if b == nil {
		return
	}
	if len(b) != n {
		z.t.Fatalf("Reserve(%d) gave %d bytes", n, len(b))
	}
	for i := range b {
		b[i] = fzFill(n, i)
	}
	z.c.Commit(n)
}

// check checks the connection's state and every frame it sent since the
// last check.
func (z *fzConn) check() {
	t, c := z.t, z.c
	t.Helper()
	if z.l.err != nil {
		t.Fatal(z.l.err)
	}
	for ; z.seen < len(z.l.sent); z.seen++ {
		b := z.l.sent[z.seen]
		h, err := nic.ParseHeader(b)
		if err != nil {
			t.Fatalf("the connection sent a malformed frame: %v", err)
		}
		if h.Cookie != fzCookie || h.Src != 1 || h.Dst != 0 || h.Epoch != fzEpoch {
			t.Fatalf("the connection sent a frame with header %+v", h)
		}
		if h.Credit > fzWindow {
			t.Fatalf("credit %d beyond the window", h.Credit)
		}
		if seqLT(z.contig, h.Ack) {
			t.Fatalf("acknowledges seq below %d; the peer sent every seq below %d only", h.Ack, z.contig)
		}
		for i := uint32(0); i < 32; i++ {
			if h.SACK&(1<<i) != 0 && !z.injected[h.Ack+1+i] {
				t.Fatalf("selectively acknowledges seq %d, never sent", h.Ack+1+i)
			}
		}
		if h.Type == nic.TypeAck {
			body := b[nic.HeaderLen:]
			for i := range 8 * len(body) {
				if body[i/8]&(1<<(i%8)) != 0 && !z.injected[h.Ack+1+uint32(i)] {
					t.Fatalf("selectively acknowledges seq %d in an acknowledgement's body, never sent", h.Ack+1+uint32(i))
				}
			}
			if len(body) > 0 && (len(body) <= 4 || len(body) > fzWindow/8) {
				t.Fatalf("an acknowledgement's body of %d bytes", len(body))
			}
			if len(body) >= 4 && binary.LittleEndian.Uint32(body) != h.SACK {
				t.Fatalf("an acknowledgement's body begins %x, its header's sack is %x", body[:4], h.SACK)
			}
		}
		z.lastAck = h.Ack
		if h.Type != nic.TypeData {
			continue
		}
		p := b[nic.HeaderLen:]
		k := packets(p)
		if k < 1 || !seqLT(h.Seq, c.sndNxt) {
			t.Fatalf("sent data frame seq %d (numbered below %d) with %d packets", h.Seq, c.sndNxt, k)
		}
		for off := 0; off < len(p); {
			n := int(binary.LittleEndian.Uint16(p[off:]))
			for i := range n {
				if p[off+pktLen+i] != fzFill(n, i) {
					t.Fatalf("sent data frame seq %d: packet of %d bytes corrupt at %d", h.Seq, n, i)
				}
			}
			off += pktLen + n
		}
		if old, ok := z.local[h.Seq]; ok && !bytes.Equal(old, p) {
			t.Fatalf("seq %d went again with other packets", h.Seq)
		}
		z.local[h.Seq] = append([]byte(nil), p...)
		if !z.anySent || !seqLT(h.Seq, z.sentTop) {
			z.sentTop, z.anySent = h.Seq+1, true
		}
	}
	if z.closed {
		return // close gives back every frame: its counters say nothing
	}
	if c.sndNxt-c.sndUna > fzWindow || c.sndSent-c.sndUna > c.sndNxt-c.sndUna {
		t.Fatalf("send window: una %d sent %d nxt %d", c.sndUna, c.sndSent, c.sndNxt)
	}
	if c.sndUna != 0 && (!z.anySent || seqLT(z.sentTop, c.sndUna)) {
		t.Fatalf("acknowledged below seq %d, but only seqs below %d went (any %v)", c.sndUna, z.sentTop, z.anySent)
	}
	if c.rcvNxt-c.dlvNxt > fzWindow || c.ooo < 0 || c.ooo > fzWindow {
		t.Fatalf("receive window: dlv %d rcv %d ooo %d", c.dlvNxt, c.rcvNxt, c.ooo)
	}
}

// nearSeq returns a seq near base (a small offset either way), or any
// seq.
func nearSeq(r *fzReader, base uint32) uint32 {
	if x := r.byte(); x < 0xc0 {
		return base + uint32(x%(2*fzWindow+8)) - 8
	}
	return r.u32()
}

// FuzzNetConn feeds a connection arbitrary frames of its peer (data with
// any seq, flags, acknowledgement and credit, well-formed packets or not;
// acknowledgements and probes; clock frames; frames not its peer's; bad
// headers; byes) among its own sends, deliveries, timers and a transmit
// queue that fills, and checks after every step: no panic; frames owned
// as nic.Link says; packets delivered to the matching layer once each,
// in order, intact; every dropped frame counted in its pvar; nothing
// acknowledged beyond what was sent, either way. At the end a well-behaved
// peer must find it making progress, or it must report the peer dead.
func FuzzNetConn(f *testing.F) {
	testcvar.Set(f, "engine_net_auth", "false")
	testcvar.Set(f, "engine_net_window", "16")
	testcvar.Set(f, "engine_net_linger", "0s")
	// Seeds: an in-order exchange; a hole then its fill; duplicates;
	// malformed payloads; foreign and stale frames; clock frames; a bye.
	f.Add([]byte{0, 8, 0, 0, 8, 0, 3, 10, 20, 30, 0, 7, 8, 8, 1, 40, 1, 50, 3, 100, 2})
	f.Add([]byte{0, 9, 0, 0, 8, 0, 1, 10, 0, 0, 8, 0, 0, 8, 0, 1, 11, 0, 7, 8, 8, 0, 8, 0, 0, 8, 0, 1, 12, 0})
	f.Add([]byte{0, 8, 0, 0, 8, 0, 2, 5, 5, 1, 0, 8, 0, 0, 8, 0, 2, 5, 5, 2, 0, 8, 0, 0, 8, 0, 2, 5, 5, 3, 7, 8, 8})
	f.Add([]byte{1, 8, 0, 0, 9, 4, 0, 4, 1, 4, 2, 4, 3, 4, 4, 4, 5, 5, 0, 5, 1, 2, 30, 2, 31})
	f.Add([]byte{3, 0, 1, 2, 3, 4, 5, 6, 7, 2, 200, 6, 9, 9, 2, 40, 10, 11, 10, 8})
	f.Add([]byte{3, 100, 2, 101, 2, 102, 9, 3, 103, 6, 10, 3, 104, 9, 1, 8, 0, 0, 8, 0, 6})
	f.Add([]byte{10, 8})
	f.Fuzz(func(t *testing.T, in []byte) {
		z := newFzConn(t)
		c, d := z.c, z.d
		r := &fzReader{b: in}
		for steps := 0; len(r.b) > 0 && steps < 4096; steps++ {
			switch r.byte() % 12 {
			case 0: // the peer's data
				seq := nearSeq(r, c.rcvNxt)
				flags := nic.Flags(r.byte())
				ack := nearSeq(r, c.sndUna)
				credit := uint16(r.byte())
				k := int(r.byte() % 4)
				mode := r.byte() % 8
				if mode > 3 {
					mode = 0
				}
				z.peerData(r, seq, flags, ack, 0, credit, k, mode)
			case 1: // the peer's acknowledgement, or its probe
				h := z.header(nic.TypeAck)
				h.Ack, h.Credit = nearSeq(r, c.sndUna), uint16(r.byte())
				if x := r.byte(); x&1 != 0 {
					h.Flags = nic.FlagAckNow
				}
				if x := r.byte(); x&1 != 0 {
					h.SACK = r.u32()
				}
				var body []byte // a selective acknowledgement of the whole window (sackBody), any length
				if x := r.byte(); x&3 == 0 {
					body = r.bytes(int(r.byte()) % (fzWindow/8 + 8))
				}
				z.inject(fzFrame(h, body), -1, false, true)
			case 2: // a clock frame, its body any length
				h := z.header(nic.TypeClock)
				if r.byte()&1 != 0 {
					h.Flags = nic.FlagAckNow
				}
				h.Ack = c.sndUna
				body := r.bytes(int(r.byte()) % (2 * clockBody))
				want := -1
				if len(body) < clockBody && c.dead == nil {
					want = fzMalformed
				}
				z.inject(fzFrame(h, body), want, false, true)
			case 3: // a frame with a bad header
				h := z.header(nic.TypeData)
				b := fzFrame(h, r.bytes(int(r.byte())%16))
				switch x := r.byte(); x % 5 {
				case 0:
					b[0] = x | 2 // another version
				case 1:
					b[1] = 6 + x%250 // an unknown type
				case 2:
					b[2] |= 0x80 // an unknown flag
				case 3:
					b = append(b, x) // a length that does not add up
				case 4:
					b = b[:int(x)%nic.HeaderLen] // short
				}
				z.inject(b, fzMalformed, false, true)
			case 4: // a frame for another endpoint, from another, or of another incarnation
				h := z.header(nic.TypeData)
				h.Seq = c.rcvNxt
				want := fzForeign
				switch x := r.byte(); x % 3 {
				case 0:
					h.Dst = 2 + uint32(x)
				case 1:
					h.Src = 1 + uint32(x)%4
				case 2:
					h.Epoch = fzPeerEpoch + 1 + uint32(x)
					want = fzStale
				}
				z.inject(fzFrame(h, []byte{2, 0, 1, 2}), want, false, true)
			case 5: // this rank sends
				z.sendLocal(1 + int(r.byte())%c.max)
				if r.byte()&1 != 0 {
					*d.polls++
					c.Wake()
				}
			case 6: // the matching layer takes packets
				max := 1 + int(r.byte()%16)
				z.deliver(max, int(r.byte()%17))
			case 7: // the end of a poll
				d.service()
			case 8: // the retransmission timer
				if c.dead == nil {
					d.now = d.clock()
					c.timeout()
				}
			case 9: // the transmit queue fills or drains
				z.l.full = r.byte()&1 != 0
			case 10: // the peer says bye
				h := z.header(nic.TypeBye)
				h.Ack = c.sndUna
				z.inject(fzFrame(h, nil), -1, false, true)
				if c.dead == nil {
					t.Fatal("a bye left the peer alive")
				}
			case 11: // arbitrary bytes
				b := append([]byte(nil), r.bytes(int(r.byte())%96)...)
				h, err := nic.ParseHeader(b)
				want := -1
				switch {
				case err != nil:
					want = fzMalformed
				case h.Type == nic.TypeData && h.Dst == 1:
					binary.LittleEndian.PutUint32(b[20:], 2) // no untagged packets: made foreign (Dst)
					want = fzForeign
				case h.Dst != 1 || h.Src != 0:
					want = fzForeign
				case h.Epoch != fzPeerEpoch:
					want = fzStale
				case h.Type == nic.TypeClock && int(h.Length) < clockBody && c.dead == nil:
					want = fzMalformed
				}
				z.inject(b, want, false, true)
			}
			z.check()
		}
		z.finish()
	})
}

// finish checks that a well-behaved peer finds the connection making
// progress (or dead, with an error), and that closing gives every frame
// back.
func (z *fzConn) finish() {
	t, c, d := z.t, z.c, z.d
	z.l.full = false
	if c.dead == nil {
		// The matching layer takes all; everything goes; the peer
		// acknowledges all of it and sends the frame after the last
		// this rank acknowledged.
		z.deliver(1<<20, 1<<20)
		c.flush()
		c.sendAck(0)
		z.check()
		h := z.header(nic.TypeAck)
		h.Ack, h.Credit = z.sentTop, fzWindow
		if !z.anySent {
			h.Ack = 0
		}
		z.inject(fzFrame(h, nil), -1, false, true)
		z.check()
		if c.dead == nil && z.anySent && c.sndUna != z.sentTop {
			t.Fatalf("everything sent acknowledged (below %d), but una is %d", z.sentTop, c.sndUna)
		}
		if c.dead == nil {
			before := c.rcvNxt
			r := &fzReader{b: []byte{10}}
			z.peerData(r, z.lastAck, 0, c.sndUna, 0, fzWindow, 1, 0)
			z.check()
			if c.dead == nil {
				if c.rcvNxt == before {
					t.Fatalf("the frame at seq %d, the one acknowledged next, was not taken", z.lastAck)
				}
				z.deliver(1<<20, 1<<20)
				if !z.delivered || z.lastSeq != z.lastAck && !seqLT(z.lastAck, z.lastSeq) {
					t.Fatalf("the frame at seq %d not delivered (last %d)", z.lastAck, z.lastSeq)
				}
			}
		}
	}
	if c.dead != nil {
		if err := c.Check(); err == nil {
			t.Fatal("a dead peer's Check returned no error")
		}
		if c.Reserve(1) != nil {
			t.Fatal("a dead peer took a packet")
		}
	}
	if err := d.close(); err != nil {
		t.Fatal(err)
	}
	z.closed = true
	z.check()
	if len(z.l.free) != fzFrames {
		t.Fatalf("closed with %d of %d frames given back", len(z.l.free), fzFrames)
	}
}
