package engine

import (
	"testing"
	"time"

	"github.com/tachyon-hpc/tachyon/internal/testcvar"
	"github.com/tachyon-hpc/tachyon/nic"
)

// sackPair is two connections over links in memory, a sender (rank 0)
// and a receiver (rank 1), with a window of 256 frames; the test carries
// their frames across by hand.
type sackPair struct {
	sl, rl *memLink
	sd, rd *netDev
	s, r   *netConn
}

func newSackPair(t *testing.T) *sackPair {
	testcvar.Set(t, "engine_net_window", "256")
	testcvar.Set(t, "engine_net_auth", "false") // the devices take no job key
	p := &sackPair{sl: newMemLink(1024, 1500), rl: newMemLink(1024, 1500)}
	var err error
	if p.sd, err = newNetDev(p.sl, 1, 0, 10, 2, nil); err != nil {
		t.Fatal(err)
	}
	if p.rd, err = newNetDev(p.rl, 1, 1, 11, 2, nil); err != nil {
		t.Fatal(err)
	}
	p.s = newNetConn(p.sd, 0, 1, 11, p.sd.clock())
	p.r = newNetConn(p.rd, 0, 0, 10, p.rd.clock())
	for _, c := range []*netConn{p.s, p.r} {
		c.max = 1500 - nic.HeaderLen - pktLen
		c.dev.conns[c.rank] = c
		c.dev.list = append(c.dev.list, c)
	}
	return p
}

// TestNetSackWindow: a receiver missing frames acknowledges on its own
// every frame it holds beyond the hole, across the whole window and not
// only the header's 32 frames (sackBody); the sender marks them all, and
// sends again the holes alone, once each: one loss does not resend the
// window, and frames past the 32 the header covers are not left to the
// retransmission timer.
func TestNetSackWindow(t *testing.T) {
	p := newSackPair(t)
	s, r := p.s, p.r
	s.cwnd = 256
	const n = 150
	for i := range n {
		b := s.Reserve(8)
		if b == nil {
			t.Fatalf("no room for frame %d", i)
		}
		b[0] = byte(i)
		s.Commit(8)
		s.flush() // a frame each
	}
	if s.sndSent != n || len(p.sl.sent) != n {
		t.Fatalf("sent %d frames (%d on the link), want %d", s.sndSent, len(p.sl.sent), n)
	}
	// The network loses frames 1 to 39 and every tenth after.
	lost := func(seq int) bool { return seq >= 1 && seq < 40 || seq%10 == 0 && seq > 0 }
	for seq, f := range p.sl.sent {
		if !lost(seq) {
			p.rl.in = append(p.rl.in, f)
		}
	}
	p.sl.sent = p.sl.sent[:0]
	p.rd.pump()
	p.rd.closeTx() // no service follows: the batch pump opened goes now
	if r.rcvNxt != 1 || r.ooo == 0 {
		t.Fatalf("the receiver is in order below %d with %d frames beyond", r.rcvNxt, r.ooo)
	}
	r.sendAck(0)
	ack := p.rl.sent[len(p.rl.sent)-1]
	h, err := nic.ParseHeader(ack)
	if err != nil || h.Type != nic.TypeAck || h.Ack != 1 {
		t.Fatalf("the acknowledgement: %+v, %v", h, err)
	}
	body := ack[nic.HeaderLen:]
	if len(body) != (n-2)/8+1 {
		t.Fatalf("an acknowledgement's body of %d bytes, want %d: a bit for each seq from 2 to %d", len(body), (n-2)/8+1, n-1)
	}
	for i := range 8 * len(body) {
		seq := 2 + i
		if got, want := body[i/8]&(1<<(i%8)) != 0, seq < n && !lost(seq); got != want {
			t.Fatalf("seq %d: acknowledged selectively %v, received %v", seq, got, want)
		}
	}
	// The sender takes it after a round trip: the holes go again, the
	// rest stays.
	fast, cuts := p.sd.fastRetx.Load(), p.sd.cc.cwndCuts.Load()
	s.srtt, s.rttvar = 1, 1          // a round trip measured before, short
	time.Sleep(2 * time.Millisecond) // a round trip since they went, and since the holes did
	p.sd.now = p.sd.clock()
	p.sl.in = append(p.sl.in, ack)
	p.sd.link.Receive(p.sd.rx[:1])
	p.sd.frame(&p.sd.rx[0])
	if s.sndUna != 1 {
		t.Fatalf("acknowledged below %d, want 1", s.sndUna)
	}
	var holes int
	for seq := 1; seq < n; seq++ {
		if sacked := s.tx[uint32(seq)&s.mask].sacked; sacked == lost(seq) {
			t.Fatalf("seq %d: marked received %v, lost %v", seq, sacked, lost(seq))
		}
		if lost(seq) && seq < n-1 {
			holes++
		}
	}
	var resent []uint32
	for _, f := range p.sl.sent {
		h, _ := nic.ParseHeader(f)
		if h.Type == nic.TypeData {
			resent = append(resent, h.Seq)
		}
	}
	if len(resent) != holes {
		t.Fatalf("sent again %d frames, want the %d holes: %v", len(resent), holes, resent)
	}
	for _, seq := range resent {
		if !lost(int(seq)) {
			t.Fatalf("sent again seq %d, which the peer has", seq)
		}
	}
	if got := p.sd.fastRetx.Load() - fast; got != uint64(holes) {
		t.Fatalf("engine_net_fast_retransmits moved by %d, want %d", got, holes)
	}
	if got := p.sd.cc.cwndCuts.Load() - cuts; got != 1 {
		t.Fatalf("engine_net_cwnd_reductions moved by %d for one round trip's losses, want 1", got)
	}
	if s.cwnd != (n-1)/2 || s.ssthresh != s.cwnd || !s.recovering || s.recover != n {
		t.Fatalf("after the cut: cwnd %d ssthresh %d recovering %v until %d; want %d, %d, true, %d", s.cwnd, s.ssthresh, s.recovering, s.recover, (n-1)/2, (n-1)/2, n)
	}
}
