package nic_test

import (
	"errors"
	"math/rand/v2"
	"net"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/tachyon-hpc/tachyon/nic"
	"github.com/tachyon-hpc/tachyon/nic/nictest"
	"github.com/tachyon-hpc/tachyon/progress"
)

const testCookie = 0x7ac4_0000_0000_0001

// A link is a progress.Poller: the progress engine's loop drives it.
var _ progress.Poller = nic.Link(nil)

// openLoopback opens a UDP link on 127.0.0.1 with a port of the kernel's.
func openLoopback(t testing.TB) nic.Link {
	t.Helper()
	l, err := nic.Open(nic.Config{Mode: nic.ModeUDP, Addr: netip.MustParseAddrPort("127.0.0.1:0"), Cookie: testCookie})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func TestUDPLink(t *testing.T) {
	a, b := openLoopback(t), openLoopback(t)
	if c := a.Card(); c.Mode != nic.ModeUDP || c.Port == 0 || c.IP != netip.MustParseAddr("127.0.0.1") || c.MTU != uint16(a.MTU()) {
		t.Fatalf("card %v", c)
	}
	if s := a.Status(); s.Mode != nic.ModeUDP || s.Fallback != "" {
		t.Fatalf("status %+v", s)
	}
	testPair(t, a, b, func(p []byte) { injectUDP(t, b.Card(), p) })
}

// injectUDP sends p from a kernel UDP socket to the link of card c.
func injectUDP(t *testing.T, c nic.Card, p []byte) {
	t.Helper()
	conn, err := net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(c.AddrPort()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write(p); err != nil {
		t.Fatal(err)
	}
}

// testPair runs the tests every kind of link passes, a sending to b.
// inject sends a datagram to b from outside Tachyon.
func testPair(t *testing.T, a, b nic.Link, inject func([]byte)) {
	t.Run("exchange", func(t *testing.T) {
		if err := nictest.Exchange(a, b, testCookie, 20000, 32, 5*time.Second); err != nil {
			t.Fatal(err)
		}
		checkAudit(t, a, b)
	})
	t.Run("one way", func(t *testing.T) { testOneWay(t, a, b) })
	t.Run("bad frames", func(t *testing.T) { testBadFrames(t, a, b, inject) })
	t.Run("send errors", func(t *testing.T) { testSendErrors(t, a, b) })
	t.Run("ownership", func(t *testing.T) { testOwnership(t, a, b) })
	t.Run("drop rate", func(t *testing.T) { testDropRate(t, a, b) })
	t.Run("allocs", func(t *testing.T) { testAllocs(t, a, b) })
	t.Run("closed", func(t *testing.T) { testClosed(t, a, b) })
}

// testClosed: a closed link moves nothing and says so, never crashes.
func testClosed(t *testing.T, a, b nic.Link) {
	pa, _ := a.AddPeer(b.Card())
	var fs [1]nic.Frame
	if a.Alloc(fs[:]) != 1 {
		t.Fatal("no free frame")
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	var rx [4]nic.RxDesc
	if n := a.Alloc(fs[:]); n != 0 {
		t.Errorf("Alloc after Close: %d", n)
	}
	if n, err := a.Send([]nic.TxDesc{{Frame: fs[0], Len: nic.HeaderLen, Peer: pa}}); n != 0 || !errors.Is(err, nic.ErrClosed) {
		t.Errorf("Send after Close: %d, %v", n, err)
	}
	if err := a.Release(fs[:]); !errors.Is(err, nic.ErrClosed) {
		t.Errorf("Release after Close: %v", err)
	}
	if n := a.Receive(rx[:]); n != 0 {
		t.Errorf("Receive after Close: %d", n)
	}
	a.Poll()
	a.Stats()
	if err := a.Close(); !errors.Is(err, nic.ErrClosed) {
		t.Errorf("second Close: %v", err)
	}
}

func checkAudit(t *testing.T, links ...nic.Link) {
	t.Helper()
	for i, l := range links {
		if err := nic.Audit(l); err != nil {
			t.Fatalf("link %d: %v", i, err)
		}
	}
}

// testOneWay: a stream of frames one way, with no Poll on either side:
// Alloc takes completed sends back and Release restocks the receive side,
// so neither link runs dry.
func testOneWay(t *testing.T, a, b nic.Link) {
	pa, err := a.AddPeer(b.Card())
	if err != nil {
		t.Fatal(err)
	}
	const total, window = 20000, 64
	var fs [16]nic.Frame
	var tx [16]nic.TxDesc
	var rx [16]nic.RxDesc
	var rel [16]nic.Frame
	sent, got := 0, 0
	deadline := time.Now().Add(10 * time.Second)
	for got < total {
		if k := min(len(fs), total-sent, window-(sent-got)); k > 0 {
			k = a.Alloc(fs[:k])
			for i := range k {
				nictest.Fill(a.Bytes(fs[i]), testCookie, uint32(sent+i), nic.HeaderLen+8)
				tx[i] = nic.TxDesc{Frame: fs[i], Len: nic.HeaderLen + 8, Peer: pa}
			}
			n, err := a.Send(tx[:k])
			if err != nil {
				t.Fatal(err)
			}
			if err := a.Release(fs[n:k]); err != nil {
				t.Fatal(err)
			}
			sent += n
		}
		n := b.Receive(rx[:])
		for i := range n {
			if err := nictest.Verify(rx[i].Data, testCookie, uint32(got+i), nic.HeaderLen+8); err != nil {
				t.Fatal(err)
			}
			rel[i] = rx[i].Frame
		}
		if err := b.Release(rel[:n]); err != nil {
			t.Fatal(err)
		}
		got += n
		if time.Now().After(deadline) {
			t.Fatalf("sent %d, received %d\n a: %+v\n b: %+v", sent, got, a.Stats(), b.Stats())
		}
	}
	checkAudit(t, a, b)
}

// testBadFrames: frames that fail the receive checks are dropped and
// counted by cause, and the next good frame still comes through.
func testBadFrames(t *testing.T, a, b nic.Link, inject func([]byte)) {
	good := make([]byte, nic.HeaderLen+4)
	nictest.Fill(good, testCookie, 1, len(good))
	mod := func(f func([]byte) []byte) []byte { return f(slices.Clone(good)) }
	before := b.Stats()
	inject(mod(func(p []byte) []byte { return p[:10] }))
	inject(mod(func(p []byte) []byte { p[0] = nic.Version + 1; return p }))
	inject(mod(func(p []byte) []byte { p[8] ^= 1; return p }))
	inject(mod(func(p []byte) []byte { return append(p, 0) }))
	inject(good)
	var rx [8]nic.RxDesc
	deadline := time.Now().Add(5 * time.Second)
	n := 0
	for n == 0 && time.Now().Before(deadline) {
		n = b.Receive(rx[:])
	}
	if n != 1 || nictest.Verify(rx[0].Data, testCookie, 1, len(good)) != nil {
		t.Fatalf("received %d frames, want the good one", n)
	}
	if err := b.Release([]nic.Frame{rx[0].Frame}); err != nil {
		t.Fatal(err)
	}
	s := b.Stats()
	// An XDP link's program drops the short frame and the one with
	// another cookie before they take a UMEM frame (Program.Foreign).
	short, cookie := s.DropShort-before.DropShort, s.DropCookie-before.DropCookie
	if b.Status().Mode == nic.ModeXDP {
		short, cookie = 1, s.Program.Foreign-before.Program.Foreign-1
	}
	if short != 1 || s.DropVersion-before.DropVersion != 1 ||
		cookie != 1 || s.DropLength-before.DropLength != 1 {
		t.Fatalf("drop counts before %+v after %+v", before, s)
	}
	checkAudit(t, b)
}

// testSendErrors: Send and Release refuse frames the caller does not
// own, unknown peers and frames over the MTU, and change nothing.
func testSendErrors(t *testing.T, a, b nic.Link) {
	p, err := a.AddPeer(b.Card())
	if err != nil {
		t.Fatal(err)
	}
	if q, err := a.AddPeer(b.Card()); err != nil || q != p {
		t.Fatalf("adding the peer again: %d, %v (first %d)", q, err, p)
	}
	var fs [1]nic.Frame
	if a.Alloc(fs[:]) != 1 {
		t.Fatal("no free frame")
	}
	if len(a.Bytes(fs[0])) != a.MTU() {
		t.Fatalf("Bytes gives %d bytes, MTU %d", len(a.Bytes(fs[0])), a.MTU())
	}
	for _, c := range []struct {
		d    nic.TxDesc
		want error
	}{
		{nic.TxDesc{Frame: fs[0], Len: uint16(a.MTU() + 1), Peer: p}, nic.ErrTooLong},
		{nic.TxDesc{Frame: fs[0], Len: nic.HeaderLen, Peer: p + 1}, nic.ErrPeer},
		{nic.TxDesc{Frame: fs[0] + 1, Len: nic.HeaderLen, Peer: p}, nic.ErrNotOwned},
		{nic.TxDesc{Frame: 1 << 30, Len: nic.HeaderLen, Peer: p}, nic.ErrNotOwned},
	} {
		if n, err := a.Send([]nic.TxDesc{c.d}); n != 0 || !errors.Is(err, c.want) {
			t.Errorf("Send(%+v) = %d, %v; want %v", c.d, n, err, c.want)
		}
	}
	if err := a.Release([]nic.Frame{fs[0], fs[0]}); !errors.Is(err, nic.ErrNotOwned) {
		t.Errorf("double release: %v", err)
	}
	if err := a.Release([]nic.Frame{1 << 30}); !errors.Is(err, nic.ErrNotOwned) {
		t.Errorf("release of no frame: %v", err)
	}
	if a.Bytes(1<<30) != nil {
		t.Error("Bytes of no frame")
	}
	if _, err := a.AddPeer(nic.Card{IP: netip.MustParseAddr("::1"), Port: 1, MAC: [6]byte{1}}); !errors.Is(err, nic.ErrPeer) {
		t.Errorf("IPv6 peer: %v", err)
	}
	checkAudit(t, a)
}

// testOwnership walks both links through random moves, misuse among
// them, and audits their ownership records after every step.
func testOwnership(t *testing.T, a, b nic.Link) {
	pa, err := a.AddPeer(b.Card())
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	owned := map[nic.Frame]bool{} // a's frames the test owns: allocated or kept
	held := map[nic.Frame]bool{}  // b's received frames the test holds
	var fs [8]nic.Frame
	var rx [8]nic.RxDesc
	seq := uint32(0)
	pick := func(m map[nic.Frame]bool) []nic.Frame {
		var out []nic.Frame
		for f := range m {
			if rng.IntN(2) == 0 {
				out = append(out, f)
			}
		}
		slices.Sort(out)
		return out
	}
	for step := range 4000 {
		switch op := rng.IntN(8); op {
		case 0: // allocate
			n := a.Alloc(fs[:1+rng.IntN(len(fs))])
			for _, f := range fs[:n] {
				if owned[f] {
					t.Fatalf("step %d: Alloc returned frame %d, which the caller owns", step, f)
				}
				owned[f] = true
			}
		case 1: // send, some kept
			var tx []nic.TxDesc
			for _, f := range pick(owned) {
				seq++
				nictest.Fill(a.Bytes(f), testCookie, seq, nic.HeaderLen+8)
				tx = append(tx, nic.TxDesc{Frame: f, Len: nic.HeaderLen + 8, Peer: pa, Keep: rng.IntN(3) == 0})
			}
			n, err := a.Send(tx)
			if err != nil && !errors.Is(err, nic.ErrInFlight) {
				t.Fatalf("step %d: Send: %v", step, err)
			}
			for _, d := range tx[:n] {
				if !d.Keep {
					delete(owned, d.Frame)
				}
			}
		case 2: // release allocated or kept frames
			fs := pick(owned)
			if err := a.Release(fs); err != nil {
				t.Fatalf("step %d: Release: %v", step, err)
			}
			for _, f := range fs {
				delete(owned, f)
			}
		case 3: // receive
			n := b.Receive(rx[:])
			for _, d := range rx[:n] {
				if held[d.Frame] {
					t.Fatalf("step %d: Receive returned frame %d, which the caller holds", step, d.Frame)
				}
				held[d.Frame] = true
			}
		case 4: // release received frames
			fs := pick(held)
			if err := b.Release(fs); err != nil {
				t.Fatalf("step %d: Release of received frames: %v", step, err)
			}
			for _, f := range fs {
				delete(held, f)
			}
		case 5:
			a.Poll()
			b.Poll()
		case 6: // misuse: frames the caller does not own
			f := nic.Frame(rng.IntN(1 << 13))
			if !owned[f] {
				if err := a.Release([]nic.Frame{f}); !errors.Is(err, nic.ErrNotOwned) {
					t.Fatalf("step %d: Release of unowned frame %d: %v", step, f, err)
				}
				if _, err := a.Send([]nic.TxDesc{{Frame: f, Len: nic.HeaderLen, Peer: pa}}); !errors.Is(err, nic.ErrNotOwned) && !errors.Is(err, nic.ErrInFlight) {
					t.Fatalf("step %d: Send of unowned frame %d: %v", step, f, err)
				}
			}
			if !held[f] {
				if err := b.Release([]nic.Frame{f}); !errors.Is(err, nic.ErrNotOwned) {
					t.Fatalf("step %d: b's Release of unheld frame %d: %v", step, f, err)
				}
			}
		case 7: // a's frames to b itself: the other direction
			var d [1]nic.Frame
			if b.Alloc(d[:]) == 1 {
				if err := b.Release(d[:]); err != nil {
					t.Fatalf("step %d: %v", step, err)
				}
			}
		}
		if err := nic.Audit(a); err != nil {
			t.Fatalf("step %d: a: %v", step, err)
		}
		if err := nic.Audit(b); err != nil {
			t.Fatalf("step %d: b: %v", step, err)
		}
	}
	// Give everything back and drain b: every frame returns to the link.
	all := make([]nic.Frame, 0, len(owned))
	for f := range owned {
		all = append(all, f)
	}
	if err := a.Release(all); err != nil {
		t.Fatal(err)
	}
	drain(t, b, held)
	a.Poll()
	checkAudit(t, a, b)
}

// drain receives and releases everything waiting on l, and the frames
// held.
func drain(t *testing.T, l nic.Link, held map[nic.Frame]bool) {
	var rel []nic.Frame
	for f := range held {
		rel = append(rel, f)
	}
	if err := l.Release(rel); err != nil {
		t.Fatal(err)
	}
	var rx [64]nic.RxDesc
	for quiet := 0; quiet < 1000; quiet++ {
		n := l.Receive(rx[:])
		if n > 0 {
			quiet = 0
		}
		for _, d := range rx[:n] {
			if err := l.Release([]nic.Frame{d.Frame}); err != nil {
				t.Fatal(err)
			}
		}
		l.Poll()
	}
}

// testDropRate: at rate 1 nothing of ours arrives; at 0 everything does.
func testDropRate(t *testing.T, a, b nic.Link) {
	if err := b.SetDropRate(1.5); err == nil {
		t.Fatal("drop rate 1.5 accepted")
	}
	if err := b.SetDropRate(1); err != nil {
		t.Fatal(err)
	}
	before := b.Stats()
	pa, _ := a.AddPeer(b.Card())
	var fs [16]nic.Frame
	n := a.Alloc(fs[:])
	tx := make([]nic.TxDesc, n)
	for i := range tx {
		nictest.Fill(a.Bytes(fs[i]), testCookie, uint32(i), nic.HeaderLen)
		tx[i] = nic.TxDesc{Frame: fs[i], Len: nic.HeaderLen, Peer: pa}
	}
	if k, err := a.Send(tx); k != n || err != nil {
		t.Fatal(k, err)
	}
	var rx [16]nic.RxDesc
	deadline := time.Now().Add(5 * time.Second)
	dropped := func() uint64 {
		s := b.Stats()
		return s.DropInjected + s.Program.Dropped - before.DropInjected - before.Program.Dropped
	}
	for dropped() < uint64(n) && time.Now().Before(deadline) {
		if k := b.Receive(rx[:]); k != 0 {
			t.Fatalf("received %d frames at drop rate 1", k)
		}
		a.Poll()
	}
	if d := dropped(); d != uint64(n) {
		t.Fatalf("dropped %d of %d", d, n)
	}
	if err := b.SetDropRate(0); err != nil {
		t.Fatal(err)
	}
	if err := nictest.Exchange(a, b, testCookie, 256, 16, 5*time.Second); err != nil {
		t.Fatal(err)
	}
}

// testAllocs: a round trip a→b→a allocates nothing.
func testAllocs(t *testing.T, a, b nic.Link) {
	pa, _ := a.AddPeer(b.Card())
	pb, _ := b.AddPeer(a.Card())
	var fs [1]nic.Frame
	var tx [1]nic.TxDesc
	var rx [4]nic.RxDesc
	var rel [4]nic.Frame
	hop := func(from, to nic.Link, p nic.Peer) {
		for polls := 0; from.Alloc(fs[:]) == 0; polls++ {
			if from.Poll(); polls > 1<<24 {
				t.Fatal("no free frame")
			}
		}
		nictest.Fill(from.Bytes(fs[0]), testCookie, 5, nic.HeaderLen+8)
		tx[0] = nic.TxDesc{Frame: fs[0], Len: nic.HeaderLen + 8, Peer: p}
		if k, err := from.Send(tx[:]); k != 1 || err != nil {
			t.Fatal(k, err)
		}
		for got, polls := 0, 0; got < 1; polls++ {
			if polls > 1<<24 {
				t.Fatal("the frame did not arrive")
			}
			n := to.Receive(rx[:])
			for i := range n {
				rel[i] = rx[i].Frame
			}
			to.Release(rel[:n])
			got += n
		}
	}
	allocs := testing.AllocsPerRun(2000, func() {
		hop(a, b, pa)
		hop(b, a, pb)
		a.Poll()
		b.Poll()
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per round trip", allocs)
	}
}

func TestOpenErrors(t *testing.T) {
	for _, c := range []struct {
		cfg  nic.Config
		want error
	}{
		{nic.Config{Mode: nic.ModeUDP, Interface: "tachyon-none0"}, nic.ErrInterface},
		{nic.Config{Mode: nic.ModeXDP, Interface: "tachyon-none0"}, nic.ErrInterface},
		{nic.Config{Mode: nic.ModeUDP}, nic.ErrConfig},
		{nic.Config{Mode: nic.ModeUDP, Addr: netip.MustParseAddrPort("[::1]:0")}, nic.ErrConfig},
		{nic.Config{Mode: nic.ModeXDP}, nic.ErrConfig},
		{nic.Config{Mode: nic.ModeUDP, Interface: "lo", Addr: netip.MustParseAddrPort("198.18.255.1:0")}, nic.ErrConfig},
		{nic.Config{Mode: nic.Mode(9)}, nic.ErrConfig},
	} {
		l, err := nic.Open(c.cfg)
		if !errors.Is(err, c.want) {
			t.Errorf("Open(%+v) = %v, want %v", c.cfg, err, c.want)
		}
		if l != nil {
			l.Close()
		}
	}
	// A port in use.
	a := openLoopback(t)
	if _, err := nic.Open(nic.Config{Mode: nic.ModeUDP, Addr: a.Card().AddrPort()}); err == nil {
		t.Error("a second link on the same port opened")
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); !errors.Is(err, nic.ErrClosed) {
		t.Errorf("second Close: %v", err)
	}
}

// TestFaults: a link with injected faults drops, repeats and reorders
// as told, counts what it did, and everything it delivers is intact.
func TestFaults(t *testing.T) {
	a := openLoopback(t)
	raw := openLoopback(t)
	if _, err := nic.WithFaults(raw, nic.Faults{Drop: 2}, 1); err == nil {
		t.Fatal("a drop probability of 2 accepted")
	}
	b, err := nic.WithFaults(raw, nic.Faults{Drop: 0.1, Duplicate: 0.1, Reorder: 0.1}, 7)
	if err != nil {
		t.Fatal(err)
	}
	pa, _ := a.AddPeer(b.Card())
	const total = 5000
	var fs [1]nic.Frame
	var tx [1]nic.TxDesc
	var rx [16]nic.RxDesc
	seen := make([]int, total)
	got, last, behind := 0, -1, 0
	receive := func() int {
		n := b.Receive(rx[:])
		for _, d := range rx[:n] {
			h, err := nic.ParseHeader(d.Data)
			if err != nil || h.Seq >= total {
				t.Fatalf("bad frame: %+v, %v", h, err)
			}
			if err := nictest.Verify(d.Data, testCookie, h.Seq, nic.HeaderLen+8); err != nil {
				t.Fatal(err)
			}
			seen[h.Seq]++
			if int(h.Seq) < last {
				behind++
			}
			last = max(last, int(h.Seq))
			if err := b.Release([]nic.Frame{d.Frame}); err != nil {
				t.Fatal(err)
			}
		}
		got += n
		return n
	}
	for i := range total {
		if a.Alloc(fs[:]) != 1 {
			t.Fatal("no free frame")
		}
		nictest.Fill(a.Bytes(fs[0]), testCookie, uint32(i), nic.HeaderLen+8)
		tx[0] = nic.TxDesc{Frame: fs[0], Len: nic.HeaderLen + 8, Peer: pa}
		if n, err := a.Send(tx[:]); n != 1 || err != nil {
			t.Fatal(n, err)
		}
		if i%8 == 7 { // bursts: several frames for each Receive
			receive()
		}
	}
	for quiet := 0; quiet < 100; quiet++ {
		if receive() > 0 {
			quiet = 0
		}
	}
	s := b.Stats()
	once, twice, none := 0, 0, 0
	for _, c := range seen {
		switch c {
		case 0:
			none++
		case 1:
			once++
		case 2:
			twice++
		default:
			t.Fatalf("a frame came %d times", c)
		}
	}
	if uint64(none) != s.DropInjected || uint64(twice) != s.Duplicated || got != total-none+twice {
		t.Fatalf("%d frames received of %d: %d none, %d twice; stats %+v", got, total, none, twice, s)
	}
	for _, c := range []struct {
		n    uint64
		what string
	}{{s.DropInjected, "dropped"}, {s.Duplicated, "duplicated"}, {s.Reordered, "reordered"}} {
		if c.n < total/20 || c.n > total/5 {
			t.Errorf("%d of %d frames %s at a probability of 0.1", c.n, total, c.what)
		}
	}
	if behind == 0 {
		t.Error("no frame came after a later one")
	}
	checkAudit(t, raw)
}
