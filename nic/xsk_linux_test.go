package nic_test

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tachyon-hpc/tachyon/internal/nethost"
	"github.com/tachyon-hpc/tachyon/internal/testcvar"
	"github.com/tachyon-hpc/tachyon/internal/testskip"
	"github.com/tachyon-hpc/tachyon/nic"
	"github.com/tachyon-hpc/tachyon/nic/nictest"
	"github.com/tachyon-hpc/tachyon/pvar"
)

// injectFrom sends p to c from a kernel UDP socket inside h.
func injectFrom(t *testing.T, h *nethost.Host, c nic.Card) func([]byte) {
	return func(p []byte) {
		err := h.Do(func() error {
			conn, err := net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(c.AddrPort()))
			if err != nil {
				return err
			}
			defer conn.Close()
			_, err = conn.Write(p)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestXDPLink runs the tests every link passes on two XDP links across a
// veth pair, with the program in each hook.
func TestXDPLink(t *testing.T) {
	for _, attach := range []string{"generic", "driver"} {
		t.Run(attach, func(t *testing.T) {
			nw := nictest.Hosts(t)
			testcvar.Set(t, "nic_xdp_attach", attach)
			a, b := nictest.OpenOn(t, nw.Hosts[0], nic.ModeXDP, testCookie), nictest.OpenOn(t, nw.Hosts[1], nic.ModeXDP, testCookie)
			s := a.Status()
			if s.Mode != nic.ModeXDP || s.Attach != attach || s.ZeroCopy || s.Interface != nw.Hosts[0].Iface || !strings.HasPrefix(s.Driver, "veth") {
				t.Fatalf("status %+v", s)
			}
			c := b.Card()
			if c.Mode != nic.ModeXDP || c.IP != nw.Hosts[1].IP || string(c.MAC[:]) != string(nw.Hosts[1].MAC) || c.Port == 0 {
				t.Fatalf("card %v, host %s %s", c, nw.Hosts[1].IP, nw.Hosts[1].MAC)
			}
			testPair(t, a, b, injectFrom(t, nw.Hosts[0], b.Card()))
			st := b.Stats()
			if st.Program.Redirected == 0 || st.RxFrames == 0 {
				t.Fatalf("stats %+v", st)
			}
			// Closing a link keeps its counts, in its Stats and in the
			// process's performance variables.
			redirected, _ := pvar.Lookup("nic_xdp_prog_redirected")
			sum := redirected.Read()
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}
			if after := b.Stats(); after.Program != st.Program || after.RxFrames != st.RxFrames || redirected.Read() < sum {
				t.Fatalf("closing: %+v (sum %d) became %+v (sum %d)", st, sum, after, redirected.Read())
			}
		})
	}
}

// TestXDPWithUDP: an XDP link and a UDP link talk, and two UDP links over
// the veth pair do too.
func TestXDPWithUDP(t *testing.T) {
	for _, c := range []struct {
		name string
		a, b nic.Mode
	}{{"xdp-udp", nic.ModeXDP, nic.ModeUDP}, {"udp-xdp", nic.ModeUDP, nic.ModeXDP}, {"udp-udp", nic.ModeUDP, nic.ModeUDP}} {
		t.Run(c.name, func(t *testing.T) {
			nw := nictest.Hosts(t)
			a, b := nictest.OpenOn(t, nw.Hosts[0], c.a, testCookie), nictest.OpenOn(t, nw.Hosts[1], c.b, testCookie)
			if err := nictest.Exchange(a, b, testCookie, 20000, 32, 5*time.Second); err != nil {
				t.Fatal(err)
			}
			checkAudit(t, a, b)
		})
	}
}

// TestXDPSendErrors: a kept frame cannot be sent again before its send
// completes, and the peers an XDP link cannot address are refused.
func TestXDPSendErrors(t *testing.T) {
	nw := nictest.Hosts(t)
	a, b := nictest.OpenOn(t, nw.Hosts[0], nic.ModeXDP, testCookie), nictest.OpenOn(t, nw.Hosts[1], nic.ModeXDP, testCookie)
	p, err := a.AddPeer(b.Card())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.AddPeer(a.Card()); !errors.Is(err, nic.ErrPeer) {
		t.Errorf("its own address as a peer: %v", err)
	}
	noMAC := b.Card()
	noMAC.MAC = [6]byte{}
	if _, err := a.AddPeer(noMAC); !errors.Is(err, nic.ErrPeer) {
		t.Errorf("peer without a MAC: %v", err)
	}
	offLink := b.Card()
	ip4 := offLink.IP.As4()
	ip4[2]++ // the next /24
	offLink.IP = netip.AddrFrom4(ip4)
	if _, err := a.AddPeer(offLink); !errors.Is(err, nic.ErrPeer) {
		t.Errorf("peer off the subnet with no route to it (%v): %v", offLink.IP, err)
	}
	var fs [1]nic.Frame
	a.Alloc(fs[:])
	nictest.Fill(a.Bytes(fs[0]), testCookie, 1, nic.HeaderLen)
	tx := []nic.TxDesc{{Frame: fs[0], Len: nic.HeaderLen, Peer: p, Keep: true}}
	if n, err := a.Send(tx); n != 1 || err != nil {
		t.Fatal(n, err)
	}
	// Until a completion is taken back, the frame is in flight.
	if n, err := a.Send(tx); n != 0 || !errors.Is(err, nic.ErrInFlight) {
		t.Fatalf("resend in flight: %d, %v", n, err)
	}
	for deadline := time.Now().Add(5 * time.Second); ; {
		a.Poll()
		if n, err := a.Send(tx); n == 1 {
			break
		} else if !errors.Is(err, nic.ErrInFlight) || time.Now().After(deadline) {
			t.Fatalf("resend: %d, %v", n, err)
		}
	}
	// Released while in flight, it is freed when the send completes.
	if err := a.Release(fs[:]); err != nil {
		t.Fatal(err)
	}
	if err := a.Release(fs[:]); !errors.Is(err, nic.ErrNotOwned) {
		t.Fatalf("second release: %v", err)
	}
	for range 100 {
		a.Poll()
	}
	checkAudit(t, a, b)
}

// TestXDPClose: Close takes the program off the interface, and a link
// opens again on the same queue right away.
func TestXDPClose(t *testing.T) {
	nw := nictest.Hosts(t)
	h := nw.Hosts[0]
	attached := func() bool {
		on, err := h.XDPAttached()
		if err != nil {
			t.Fatal(err)
		}
		return on
	}
	for i := range 5 {
		var l nic.Link
		if err := h.Do(func() (err error) {
			l, err = nic.Open(nic.Config{Interface: h.Iface, Mode: nic.ModeXDP, Cookie: testCookie})
			return err
		}); err != nil {
			t.Fatalf("open %d: %v", i, err)
		}
		if !attached() {
			t.Fatalf("open %d: no XDP program on %s", i, h.Iface)
		}
		if err := l.Close(); err != nil {
			t.Fatalf("close %d: %v", i, err)
		}
		if attached() {
			t.Fatalf("close %d: the XDP program stayed on %s", i, h.Iface)
		}
	}
}

// TestXDPOpenErrors: what Open says when AF_XDP cannot be had, and what
// ModeAuto does then.
func TestXDPOpenErrors(t *testing.T) {
	nw := nictest.Hosts(t)
	h := nw.Hosts[0]
	// Auto takes XDP where it can.
	l := nictest.OpenOn(t, h, nic.ModeAuto, testCookie)
	if s := l.Status(); s.Mode != nic.ModeXDP || s.Attach != "generic" {
		t.Fatalf("auto as root on a veth took %+v, want XDP in the generic hook", s)
	}
	l.Close()
	// An interface without an IPv4 address.
	if err := h.Do(func() error {
		_, err := nic.Open(nic.Config{Interface: "lo", Mode: nic.ModeXDP})
		return err
	}); !errors.Is(err, nic.ErrInterface) && !errors.Is(err, nic.ErrRefused) {
		t.Errorf("XDP on lo: %v", err)
	}
	// Without the capabilities: a thread that dropped them.
	err := h.Do(func() error {
		if err := dropCaps(); err != nil {
			return err
		}
		_, err := nic.Open(nic.Config{Interface: h.Iface, Mode: nic.ModeXDP, Cookie: testCookie})
		if !errors.Is(err, nic.ErrNoPrivilege) {
			return errors.New("ModeXDP without privilege: " + errString(err))
		}
		l, err := nic.Open(nic.Config{Interface: h.Iface, Mode: nic.ModeAuto, Cookie: testCookie})
		if err != nil {
			return err
		}
		defer l.Close()
		if s := l.Status(); s.Mode != nic.ModeUDP || !strings.Contains(s.Fallback, "needs root") {
			return errors.New("auto without privilege: " + s.Fallback)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestXDPOpenMemlock: a thread without CAP_IPC_LOCK, over a memlock
// limit below the UMEM, cannot register it: ModeXDP says which privilege
// is missing (ErrNoPrivilege), and ModeAuto takes UDP and says why.
func TestXDPOpenMemlock(t *testing.T) {
	nw := nictest.Hosts(t)
	h := nw.Hosts[0]
	var old unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_MEMLOCK, &old); err != nil {
		t.Fatal(err)
	}
	low := unix.Rlimit{Cur: 64 << 10, Max: old.Max} // below any UMEM, above the BPF maps' needs where charged
	if err := unix.Setrlimit(unix.RLIMIT_MEMLOCK, &low); err != nil {
		t.Fatal(err)
	}
	defer unix.Setrlimit(unix.RLIMIT_MEMLOCK, &old)
	err := h.Do(func() error {
		if err := dropCap(unix.CAP_IPC_LOCK); err != nil {
			return err
		}
		_, err := nic.Open(nic.Config{Interface: h.Iface, Mode: nic.ModeXDP, Cookie: testCookie})
		if !errors.Is(err, nic.ErrNoPrivilege) || !strings.Contains(errString(err), "CAP_IPC_LOCK") {
			return errors.New("ModeXDP over the memlock limit: " + errString(err))
		}
		l, err := nic.Open(nic.Config{Interface: h.Iface, Mode: nic.ModeAuto, Cookie: testCookie})
		if err != nil {
			return fmt.Errorf("ModeAuto over the memlock limit: %w", err)
		}
		defer l.Close()
		if s := l.Status(); s.Mode != nic.ModeUDP || !strings.Contains(s.Fallback, "UMEM") {
			return fmt.Errorf("auto over the memlock limit took %v: %q", s.Mode, s.Fallback)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The failed opens left nothing behind: XDP opens again.
	nictest.OpenOn(t, h, nic.ModeXDP, testCookie).Close()
}

func errString(err error) string {
	if err == nil {
		return "no error"
	}
	return err.Error()
}

// dropCaps drops every effective capability of the calling thread (Linux
// keeps them per thread), which Host.Do runs alone and ends afterwards.
func dropCaps() error {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return err
	}
	data[0].Effective, data[1].Effective = 0, 0
	return unix.Capset(&hdr, &data[0])
}

// dropCap drops capability c from the calling thread's effective set.
func dropCap(c int) error {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return err
	}
	data[c/32].Effective &^= 1 << (c % 32)
	return unix.Capset(&hdr, &data[0])
}

// TestDefaultInterface: in a test host the default interface is its
// veth (no default route there: the first one up with an address), and
// nic_interface overrides it.
func TestDefaultInterface(t *testing.T) {
	nw := nictest.Hosts(t)
	h := nw.Hosts[0]
	if err := h.Do(func() error {
		name, err := nic.DefaultInterface()
		if err != nil || name != h.Iface {
			return fmt.Errorf("DefaultInterface = %q, %v; want %q", name, err, h.Iface)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	testcvar.Set(t, "nic_interface", "eth7")
	if name, err := nic.DefaultInterface(); name != "eth7" || err != nil {
		t.Fatalf("with nic_interface set: %q, %v", name, err)
	}
}

// TestXDPJumbo: on a veth pair of MTU 9000, links take frames of the
// interface's MTU: an XDP link's span three UMEM chunks (multi-buffer
// AF_XDP, XDP_USE_SG), with the program in either hook (frags-aware in
// the driver's, which refuses a plain one at this MTU), and a UDP link
// carries the same frames, so the two talk. Exchange sends every length
// up to the MTU, those around the chunks' edges and 8 KiB among them.
// nic_max_mtu keeps frames to one chunk.
func TestXDPJumbo(t *testing.T) {
	const mtu = 9000
	for _, c := range []struct {
		name   string
		a, b   nic.Mode
		attach string
	}{
		{"xdp-generic", nic.ModeXDP, nic.ModeXDP, "generic"},
		{"xdp-driver", nic.ModeXDP, nic.ModeXDP, "driver"},
		{"xdp-udp", nic.ModeXDP, nic.ModeUDP, "auto"},
		{"udp-xdp", nic.ModeUDP, nic.ModeXDP, "auto"},
		{"udp-udp", nic.ModeUDP, nic.ModeUDP, "auto"},
	} {
		t.Run(c.name, func(t *testing.T) {
			nw := nictest.JumboHosts(t, mtu)
			testcvar.Set(t, "nic_xdp_attach", c.attach)
			a, b := nictest.OpenOn(t, nw.Hosts[0], c.a, testCookie), nictest.OpenOn(t, nw.Hosts[1], c.b, testCookie)
			for _, l := range []nic.Link{a, b} {
				s := l.Status()
				if l.MTU() != mtu-28 || int(l.Card().MTU) != l.MTU() || s.FrameLimit != "" || s.MultiBuffer != (s.Mode == nic.ModeXDP) {
					t.Fatalf("MTU %d, card %v, status %+v", l.MTU(), l.Card(), s)
				}
				if s.Mode == nic.ModeXDP && s.Attach != c.attach && c.attach != "auto" {
					t.Fatalf("status %+v", s)
				}
			}
			if c.a == nic.ModeXDP && c.b == nic.ModeXDP {
				testPair(t, a, b, injectFrom(t, nw.Hosts[0], b.Card()))
				if st := b.Stats(); st.Program.Redirected < 20000 || st.RxFallback != 0 || st.Kernel.RxDropped != 0 {
					t.Fatalf("stats %+v", st)
				}
				return
			}
			if err := nictest.Exchange(a, b, testCookie, 20000, 32, 10*time.Second); err != nil {
				t.Fatal(err)
			}
			checkAudit(t, a, b)
		})
	}
	t.Run("queues", func(t *testing.T) {
		// The sockets that share the first's UMEM are multi-buffer too:
		// a's frames leave on its queue 2 and reach b's second socket.
		if err := nethost.Available(); err != nil {
			testskip.Skip(t, testskip.NoNamespaces, err)
		}
		nw, err := nethost.New(nethost.Config{MTU: mtu, Queues: 4, Prefix: "tq"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { nw.Close() })
		testcvar.Set(t, "nic_xdp_attach", "generic")
		a := openCfg(t, nw.Hosts[0], nic.Config{Mode: nic.ModeXDP, Queues: []int{2}})
		b := openCfg(t, nw.Hosts[1], nic.Config{Mode: nic.ModeXDP})
		if s := b.Status(); len(s.Queues) != 4 || !s.MultiBuffer || b.MTU() != mtu-28 {
			t.Fatalf("MTU %d, status %+v", b.MTU(), s)
		}
		if err := nictest.Exchange(a, b, testCookie, 5000, 32, 10*time.Second); err != nil {
			t.Fatal(err)
		}
		checkAudit(t, a, b)
		if st := b.Stats(); st.Program.Redirected < 5000 || st.RxFallback != 0 {
			t.Fatalf("stats %+v", st)
		}
	})
	t.Run("small-ring", func(t *testing.T) {
		// Frames of three chunks each overfill a transmit ring of 16:
		// Send takes the five that fit whole, and the rest after.
		nw := nictest.JumboHosts(t, mtu)
		testcvar.Set(t, "nic_xdp_attach", "generic")
		testcvar.Set(t, "nic_ring_size", "16")
		testcvar.Set(t, "nic_frames", "64")
		a, b := nictest.OpenOn(t, nw.Hosts[0], nic.ModeXDP, testCookie), nictest.OpenOn(t, nw.Hosts[1], nic.ModeXDP, testCookie)
		p, err := a.AddPeer(b.Card())
		if err != nil {
			t.Fatal(err)
		}
		var fs [8]nic.Frame
		if a.Alloc(fs[:]) != len(fs) {
			t.Fatal("no free frames")
		}
		tx := make([]nic.TxDesc, len(fs))
		for i, f := range fs {
			nictest.Fill(a.Bytes(f), testCookie, uint32(i), a.MTU())
			tx[i] = nic.TxDesc{Frame: f, Len: uint16(a.MTU()), Peer: p}
		}
		var rx [8]nic.RxDesc
		got := 0
		receive := func(want int) {
			deadline := time.Now().Add(5 * time.Second)
			for got < want && time.Now().Before(deadline) {
				a.Poll()
				b.Poll()
				k := b.Receive(rx[:])
				for _, d := range rx[:k] {
					if err := nictest.Verify(d.Data, testCookie, uint32(got), a.MTU()); err != nil {
						t.Fatalf("frame %d: %v", got, err)
					}
					got++
					if err := b.Release([]nic.Frame{d.Frame}); err != nil {
						t.Fatal(err)
					}
				}
			}
			if got != want {
				t.Fatalf("received %d frames of %d; a %+v, b %+v", got, want, a.Stats(), b.Stats())
			}
		}
		n, err := a.Send(tx)
		if n != 5 || err != nil || a.Stats().TxFull != 1 {
			t.Fatalf("Send of 8 frames of 3 chunks on a ring of 16: %d, %v, %+v", n, err, a.Stats())
		}
		receive(5)
		if m, err := a.Send(tx[n:]); m != 3 || err != nil {
			t.Fatalf("Send of the other 3: %d, %v", m, err)
		}
		receive(8)
		checkAudit(t, a, b)
	})
	t.Run("capped", func(t *testing.T) {
		nw := nictest.JumboHosts(t, mtu)
		testcvar.Set(t, "nic_max_mtu", "3000")
		a, b := nictest.OpenOn(t, nw.Hosts[0], nic.ModeXDP, testCookie), nictest.OpenOn(t, nw.Hosts[1], nic.ModeUDP, testCookie)
		for _, l := range []nic.Link{a, b} {
			if s := l.Status(); l.MTU() != 3000-28 || s.MultiBuffer || s.FrameLimit != "nic_max_mtu 3000" {
				t.Fatalf("MTU %d, status %+v", l.MTU(), s)
			}
		}
		if err := nictest.Exchange(a, b, testCookie, 5000, 32, 10*time.Second); err != nil {
			t.Fatal(err)
		}
		checkAudit(t, a, b)
	})
}
