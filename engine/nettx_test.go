package engine

import (
	"testing"
	"time"

	"github.com/tachyon-hpc/tachyon/asm"
	"github.com/tachyon-hpc/tachyon/internal/testcvar"
	"github.com/tachyon-hpc/tachyon/nic"
	"github.com/tachyon-hpc/tachyon/progress"
)

// txRig is a device over a link in memory with connections to peers 0
// and 2 (the device is rank 1), driven by hand.
type txRig struct {
	l     *memLink
	d     *netDev
	conns []*netConn
}

func newTxRig(t *testing.T) *txRig {
	t.Helper()
	testcvar.Set(t, "engine_net_auth", "false")      // the device takes no job key
	testcvar.Set(t, "engine_net_rto_initial", "30s") // no timeout while a loaded machine runs the test
	l := newMemLink(1024, 1500)
	d, err := newNetDev(l, 1, 1, 3, 3, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := &txRig{l: l, d: d}
	for _, rank := range []uint32{0, 2} {
		c := newNetConn(d, 0, rank, 7, d.clock())
		c.max = 1500 - nic.HeaderLen - pktLen
		d.conns[rank] = c
		d.list = append(d.list, c)
		r.conns = append(r.conns, c)
	}
	t.Cleanup(func() {
		if l.err != nil {
			t.Error(l.err)
		}
	})
	return r
}

// put commits a packet of n bytes to c, failing if there is no room.
func (r *txRig) put(t *testing.T, c *netConn, n int) {
	t.Helper()
	r.burst(t, c, n, 1)
	c.Wake()
}

// burst commits k packets of n bytes to c with no Wake between them, as
// a burst of sends with no poll between does, failing if there is no
// room.
func (r *txRig) burst(t *testing.T, c *netConn, n, k int) {
	t.Helper()
	for range k {
		p := c.Reserve(n)
		if p == nil {
			t.Fatalf("no room for a %d-byte packet to peer %d", n, c.rank)
		}
		p[0] = 1
		c.Commit(n)
	}
}

// seqs returns the (Dst, Seq) of the data frames the link took, and
// empties it.
func (r *txRig) seqs(t *testing.T) [][2]uint32 {
	t.Helper()
	var s [][2]uint32
	for _, b := range r.l.sent {
		h, err := nic.ParseHeader(b)
		if err != nil {
			t.Fatal(err)
		}
		if h.Type == nic.TypeData {
			s = append(s, [2]uint32{h.Dst, h.Seq})
		}
	}
	r.l.sent = r.l.sent[:0]
	return s
}

// TestNetTxBatch: the frames a poll sends, to every peer, data and
// acknowledgements alike, go to the link in one Send; a lone frame
// outside a poll goes at once, and the frames a burst fills wait for the
// one left open behind them and go with it.
func TestNetTxBatch(t *testing.T) {
	r := newTxRig(t)
	a, b := r.conns[0], r.conns[1]
	big := a.max - 16

	// A ping-pong's frame goes at once, alone.
	r.put(t, a, 8)
	if r.l.sends != 1 || len(r.l.sent) != 1 {
		t.Fatalf("a lone frame: %d sends of %d frames, want 1 of 1", r.l.sends, len(r.l.sent))
	}
	r.seqs(t)

	// A burst behind it: the full frames wait for the next poll.
	*r.d.polls++ // a poll since: Wake sends what is open, as the endpoint's would
	r.burst(t, a, big, 4)
	if r.l.sends != 1 {
		t.Fatalf("the burst's full frames went before its end: %d sends", r.l.sends)
	}
	a.Wake()
	if got := r.seqs(t); r.l.sends != 2 || len(got) != 4 || got[0][1] != 1 || got[3][1] != 4 {
		t.Fatalf("the burst's end: %d sends in all, frames %v; want one more send of seqs 1-4", r.l.sends, got)
	}

	// A poll: frames to both peers and an acknowledgement owed, in one Send.
	sends := r.l.sends
	r.d.pump()
	r.burst(t, b, big, 3)
	a.ackNow = true
	r.d.service()
	if r.l.sends != sends+1 {
		t.Fatalf("a poll's frames took %d sends, want 1", r.l.sends-sends)
	}
	n := len(r.l.sent)
	if got := r.seqs(t); n != 4 || len(got) != 3 {
		t.Fatalf("the poll sent %d frames, data %v: want 3 data frames to peer 2 and an acknowledgement", n, got)
	}
	if want := pvNetTxSends.ValueOf(nil); want == 0 {
		t.Fatal("engine_net_tx_sends counted nothing")
	}
}

// TestNetTxBurstSmall: in a burst of small messages behind a frame in
// flight, a frame goes once it carries engine_net_burst_packets of them
// and engine_net_burst_bytes, with the full frames held before it, so
// the peer starts on them while the burst goes on; one that fills with
// fewer (large messages) is held for the batch.
func TestNetTxBurstSmall(t *testing.T) {
	testcvar.Set(t, "engine_net_burst_packets", "12")
	testcvar.Set(t, "engine_net_burst_bytes", "1024")
	r := newTxRig(t)
	a := r.conns[0]
	r.put(t, a, 8) // in flight: what follows is a burst
	r.seqs(t)
	*r.d.polls++

	// Two large packets a frame: held.
	big := a.max/2 - 16
	r.burst(t, a, big, 4)
	if got := r.seqs(t); len(got) != 0 {
		t.Fatalf("frames of two large packets went before the burst's end: %v", got)
	}
	// Small ones: the frame open behind the large ones (seq 3) goes at
	// the 12th, with the frames held before it; 11 are not enough.
	r.burst(t, a, 100, 11)
	if got := r.seqs(t); len(got) != 0 {
		t.Fatalf("a frame of 11 small packets went: %v", got)
	}
	r.burst(t, a, 100, 1)
	if got := r.seqs(t); len(got) != 3 || got[0][1] != 1 || got[2][1] != 3 {
		t.Fatalf("at the 12th small packet: frames %v, want seqs 1-3", got)
	}
	// The next frame, of 8-byte packets, goes alone once it holds 1024
	// bytes of them with their lengths: not at its 12th packet.
	k := 1024 / (8 + pktLen)
	r.burst(t, a, 8, k)
	if got := r.seqs(t); len(got) != 0 {
		t.Fatalf("the next frame went at %d packets of 8 bytes: %v", k, got)
	}
	r.burst(t, a, 8, 1)
	if got := r.seqs(t); len(got) != 1 || got[0][1] != 4 {
		t.Fatalf("the next frame at %d packets: %v, want seq 4", k+1, got)
	}

	// 0 holds every frame for the batch.
	testcvar.Set(t, "engine_net_burst_packets", "0")
	r = newTxRig(t)
	a = r.conns[0]
	r.put(t, a, 8)
	r.seqs(t)
	*r.d.polls++
	r.burst(t, a, 100, 40)
	if got := r.seqs(t); len(got) != 0 {
		t.Fatalf("engine_net_burst_packets 0: frames went in the burst: %v", got)
	}
}

// TestNetTxBatchRefused: frames of a batch the link does not take are
// handled as a single frame's refusal: not counted sent, an
// acknowledgement owed again, and sent, in order and once each, by the
// next poll.
func TestNetTxBatchRefused(t *testing.T) {
	r := newTxRig(t)
	a, b := r.conns[0], r.conns[1]
	big := a.max - 16
	r.l.take = 2
	r.d.pump()
	for range 3 {
		for _, c := range r.conns {
			r.burst(t, c, big, 1)
		}
	}
	r.d.service()
	// The queue: a0, b0, a1, b1, a2, b2 (the lone first frames went as
	// the batch's first two), and the open frames of each.
	got := r.seqs(t)
	if len(got) != 2 {
		t.Fatalf("the link took %v, want 2 frames", got)
	}
	if a.sndSent != 1 || b.sndSent != 1 || !a.ackNow || !b.ackNow {
		t.Fatalf("after the refusal: sent below %d and %d, acknowledgements owed %v %v; want 1, 1, owed", a.sndSent, b.sndSent, a.ackNow, b.ackNow)
	}
	for _, c := range r.conns {
		for s := c.sndUna; s != c.sndNxt; s++ {
			if c.tx[s&c.mask].queued {
				t.Fatalf("frame %d to peer %d still marked queued", s, c.rank)
			}
		}
	}
	r.l.take = 0
	r.d.pump()
	r.d.service()
	seen := map[[2]uint32]bool{}
	for _, f := range append(got, r.seqs(t)...) {
		if seen[f] {
			t.Fatalf("frame %v went twice", f)
		}
		seen[f] = true
	}
	for _, c := range r.conns {
		if c.sndSent != c.sndNxt || c.sndNxt != 3 {
			t.Fatalf("peer %d: sent below %d of %d numbered, want 3 of 3", c.rank, c.sndSent, c.sndNxt)
		}
		for s := range c.sndNxt {
			if !seen[[2]uint32{c.rank, s}] {
				t.Fatalf("frame %d to peer %d never went", s, c.rank)
			}
		}
	}
}

// TestNetPace: once a loss has cut the window, a window above
// engine_net_pace_burst goes in a burst of that many frames, the rest at
// their slots over the round trip; with no loss, all at once.
func TestNetPace(t *testing.T) {
	testcvar.Set(t, "engine_net_pace_burst", "8")
	for _, loss := range []bool{false, true} {
		r := newTxRig(t)
		a := r.conns[0]
		big := a.max - 16
		a.cwnd = 40
		a.srtt = progress.SecondsToCounts((2 * time.Millisecond).Seconds())
		if loss {
			a.ssthresh = 20
		}
		waits, paced := r.d.cc.paceWaits.Load(), r.d.cc.paced.Load()
		r.d.pump()
		r.burst(t, a, big, 30)
		r.d.service()
		got := len(r.seqs(t))
		if !loss {
			if got != 30 || r.d.cc.paceWaits.Load() != waits {
				t.Fatalf("no loss: %d frames of 30 went at once, %d pacing waits", got, r.d.cc.paceWaits.Load()-waits)
			}
			continue
		}
		if got != 8 || r.d.cc.paceWaits.Load() != waits+1 || !a.paceHeld {
			t.Fatalf("after a loss: %d frames went at once (want the burst, 8), %d pacing waits (want 1)", got, r.d.cc.paceWaits.Load()-waits)
		}
		if due := asm.LoadAcquire64(&r.d.due); due == 0 || due > a.paceAt {
			t.Fatalf("the device's timer %d does not wake the rank for the pacing slot %d", due, a.paceAt)
		}
		// The 22 others, at twice a window a round trip: about half a millisecond.
		deadline := time.Now().Add(time.Second)
		sent := got
		for sent < 30 && time.Now().Before(deadline) {
			time.Sleep(100 * time.Microsecond)
			r.d.pump()
			r.d.service()
			sent += len(r.seqs(t))
		}
		if sent != 30 || a.paceHeld {
			t.Fatalf("%d frames of 30 went, pacing still holding %v", sent, a.paceHeld)
		}
		if p := r.d.cc.paced.Load() - paced; p != 22 {
			t.Fatalf("engine_net_paced_frames counted %d, want 22", p)
		}
	}
}
