package nic_test

import (
	"fmt"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/tachyon-hpc/tachyon/internal/nethost"
	"github.com/tachyon-hpc/tachyon/internal/testskip"
	"github.com/tachyon-hpc/tachyon/nic"
	"github.com/tachyon-hpc/tachyon/nic/nictest"
)

// newQueued makes two test hosts joined by a veth pair of queues queues
// on each end, or skips.
func newQueued(t testing.TB, queues int) *nethost.Network {
	t.Helper()
	if err := nethost.Available(); err != nil {
		testskip.Skip(t, testskip.NoNamespaces, err)
	}
	nw, err := nethost.New(nethost.Config{Queues: queues})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nw.Close() })
	return nw
}

// openCfg opens a link as cfg says (Interface and Cookie filled in)
// inside h.
func openCfg(t testing.TB, h *nethost.Host, cfg nic.Config) nic.Link {
	t.Helper()
	cfg.Interface, cfg.Cookie = h.Iface, testCookie
	var l nic.Link
	if err := h.Do(func() (err error) {
		l, err = nic.Open(cfg)
		return err
	}); err != nil {
		t.Fatalf("opening a link %+v on %s: %v", cfg, h.Name, err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// sendSpread sends n frames from each sender to b and receives them all
// on b, checking each; the senders are XDP links bound to one queue each,
// so that their frames leave on that transmit queue, and so arrive on
// one receive queue at b each (with the generic hook, a veth gives a
// frame sent on queue q >= 1 to the peer's queue q-1, and queue 0's to
// 0: the spread covers queues 0 to 2 of 4).
func sendSpread(t *testing.T, senders []nic.Link, b nic.Link, n int) {
	t.Helper()
	peers := make([]nic.Peer, len(senders))
	for i, a := range senders {
		p, err := a.AddPeer(b.Card())
		if err != nil {
			t.Fatal(err)
		}
		peers[i] = p
	}
	const size = nic.HeaderLen + 16
	got := map[[2]int]bool{}
	var rx [64]nic.RxDesc
	var rel [64]nic.Frame
	deadline := time.Now().Add(10 * time.Second)
	receive := func() {
		k := b.Receive(rx[:])
		for i := range k {
			d := rx[i].Data
			ok := false
			for s := range senders {
				for seq := range n {
					if !got[[2]int{s, seq}] && nictest.Verify(d, testCookie, uint32(s<<16|seq), size) == nil {
						got[[2]int{s, seq}], ok = true, true
						break
					}
				}
				if ok {
					break
				}
			}
			if !ok {
				t.Fatalf("received a frame sent by none or twice: % x", d[:min(len(d), 48)])
			}
			rel[i] = rx[i].Frame
		}
		if err := b.Release(rel[:k]); err != nil {
			t.Fatal(err)
		}
	}
	for seq := range n {
		for s, a := range senders {
			var f [1]nic.Frame
			for a.Alloc(f[:]) == 0 {
				a.Poll()
				receive()
			}
			nictest.Fill(a.Bytes(f[0]), testCookie, uint32(s<<16|seq), size)
			for {
				k, err := a.Send([]nic.TxDesc{{Frame: f[0], Len: size, Peer: peers[s]}})
				if err != nil {
					t.Fatal(err)
				}
				if k == 1 {
					break
				}
				a.Poll()
			}
		}
		receive()
	}
	for len(got) < n*len(senders) {
		for _, a := range senders {
			a.Poll()
		}
		b.Poll()
		receive()
		if time.Now().After(deadline) {
			t.Fatalf("received %d of %d frames; b: %+v", len(got), n*len(senders), b.Stats())
		}
	}
}

// TestXDPQueues: a link binds a socket on every receive queue of its
// interface, sharing one UMEM, and receives frames on all of them; a
// link on fewer queues receives the frames of the others through its
// UDP socket, counted, none lost.
func TestXDPQueues(t *testing.T) {
	const queues, n = 4, 500
	nw := newQueued(t, queues)
	var senders []nic.Link
	for q := range queues {
		senders = append(senders, openCfg(t, nw.Hosts[0], nic.Config{Mode: nic.ModeXDP, Queues: []int{q}}))
		if s := senders[q].Status(); !slices.Equal(s.Queues, []int{q}) || s.InterfaceQueues != queues {
			t.Fatalf("sender %d: status %+v", q, s)
		}
	}
	// A link alone takes the queues no other link holds: none here.
	if l, err := openAuto(nw.Hosts[0]); err != nil || l.Status().Mode != nic.ModeUDP {
		t.Fatalf("a fifth link on a host whose queues are all held: %v, %+v", err, l)
	} else {
		t.Logf("fifth link: %s", l.Status().Fallback)
		l.Close()
	}

	t.Run("every queue", func(t *testing.T) {
		b := openCfg(t, nw.Hosts[1], nic.Config{Mode: nic.ModeXDP})
		if s := b.Status(); !slices.Equal(s.Queues, []int{0, 1, 2, 3}) {
			t.Fatalf("status %+v", s)
		}
		sendSpread(t, senders, b, n)
		st := b.Stats()
		t.Logf("b: %+v", st)
		if st.Program.Redirected != queues*n || st.Program.Misqueued != 0 || st.RxFallback != 0 {
			t.Errorf("program redirected %d, misqueued %d, fallback read %d; want %d, 0, 0",
				st.Program.Redirected, st.Program.Misqueued, st.RxFallback, queues*n)
		}
		checkAudit(t, b)
	})
	t.Run("queue 1 only", func(t *testing.T) {
		b := openCfg(t, nw.Hosts[1], nic.Config{Mode: nic.ModeXDP, Queues: []int{1}})
		if b.Status().Steered {
			t.Fatal("a veth took a flow rule: it has no n-tuple filters")
		}
		sendSpread(t, senders, b, n)
		st := b.Stats()
		t.Logf("b: %+v", st)
		if st.Program.Redirected == 0 || st.Program.Misqueued == 0 || st.Program.Redirected+st.Program.Misqueued != queues*n ||
			st.RxFallback != st.Program.Misqueued {
			t.Errorf("program redirected %d, misqueued %d, fallback read %d of %d",
				st.Program.Redirected, st.Program.Misqueued, st.RxFallback, queues*n)
		}
		checkAudit(t, b)
	})
	t.Run("shared", func(t *testing.T) {
		// Two links of a host share its queues, each its half, and the
		// program: each takes its own frames from its queues and the
		// other's through its UDP socket.
		var bs []nic.Link
		for i := range 2 {
			bs = append(bs, openCfg(t, nw.Hosts[1], nic.Config{Mode: nic.ModeXDP, Share: nic.Share{Index: i, Count: 2}}))
			if s := bs[i].Status(); !slices.Equal(s.Queues, []int{i, i + 2}) {
				t.Fatalf("link %d: status %+v", i, s)
			}
		}
		for i, b := range bs {
			sendSpread(t, senders, b, n)
			st := b.Stats()
			t.Logf("link %d: %+v", i, st)
			if st.Program.Redirected == 0 || st.RxFallback == 0 || st.Program.Redirected+st.RxFallback != queues*n {
				t.Errorf("link %d: program redirected %d, fallback read %d of %d", i, st.Program.Redirected, st.RxFallback, queues*n)
			}
		}
		// A third would have no queue.
		err := nw.Hosts[1].Do(func() error {
			_, err := nic.Open(nic.Config{Interface: nw.Hosts[1].Iface, Mode: nic.ModeXDP, Share: nic.Share{Index: 1, Count: 2}})
			return err
		})
		if err == nil {
			t.Fatal("a link on queues another holds: no error")
		}
		t.Log(err)
	})
}

// openAuto opens a link in ModeAuto inside h.
func openAuto(h *nethost.Host) (nic.Link, error) {
	var l nic.Link
	err := h.Do(func() (err error) {
		l, err = nic.Open(nic.Config{Interface: h.Iface, Mode: nic.ModeAuto, Cookie: testCookie})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("opening on %s: %w", h.Name, err)
	}
	return l, nil
}

// TestXDPForeignFlood: frames to a link's port with another job's cookie
// are dropped by the program and counted, and take no UMEM frame: the
// link's own frames still come through after a flood of them.
func TestXDPForeignFlood(t *testing.T) {
	const flood = 5000
	nw := nictest.Hosts(t)
	b := nictest.OpenOn(t, nw.Hosts[1], nic.ModeXDP, testCookie)
	bad := make([]byte, nic.HeaderLen+8)
	nictest.Fill(bad, testCookie^1, 1, len(bad))
	good := make([]byte, nic.HeaderLen+8)
	nictest.Fill(good, testCookie, 2, len(good))
	err := nw.Hosts[0].Do(func() error {
		conn, err := net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(b.Card().AddrPort()))
		if err != nil {
			return err
		}
		defer conn.Close()
		for range flood {
			if _, err := conn.Write(bad); err != nil {
				return err
			}
		}
		_, err = conn.Write(good)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	var rx [8]nic.RxDesc
	n := 0
	for deadline := time.Now().Add(5 * time.Second); n == 0 && time.Now().Before(deadline); {
		n = b.Receive(rx[:])
	}
	if n != 1 || nictest.Verify(rx[0].Data, testCookie, 2, len(good)) != nil {
		t.Fatalf("received %d frames after the flood, want the good one; %+v", n, b.Stats())
	}
	b.Release([]nic.Frame{rx[0].Frame})
	st := b.Stats()
	if st.Program.Foreign != flood || st.DropCookie != 0 || st.RxFrames != 1 || st.Kernel.RxDropped != 0 || st.Kernel.RxRingFull != 0 {
		t.Fatalf("after a flood of %d foreign frames: %+v", flood, st)
	}
	checkAudit(t, b)
}
