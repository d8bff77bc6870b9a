//go:build linux

package hwtests

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tachyon-hpc/tachyon/internal/nethost"
	"github.com/tachyon-hpc/tachyon/internal/testcvar"
	"github.com/tachyon-hpc/tachyon/internal/testrole"
	"github.com/tachyon-hpc/tachyon/nic"
	"github.com/tachyon-hpc/tachyon/nic/nictest"
)

// The NIC path's frame tests: two test hosts (network namespaces joined
// by a veth pair, made and removed by the test) exchange a million frames
// both ways, every byte checked, in each pairing of link kinds and with
// the XDP program in each hook; and a ping-pong against a peer on a real
// interface when TACHYON_NIC and TACHYON_NIC_PEER name one.

const nicCookie = 0x6877_7465_7374_0001

// TestNICMillionFrames: a million frames each way in every pairing, and
// a fifth as many of up to 8,972 bytes over a veth pair of MTU 9000
// (multi-buffer AF_XDP: each up to three UMEM chunks).
func TestNICMillionFrames(t *testing.T) {
	million := 1_000_000
	if raceEnabled {
		million = 100_000 // the race detector slows every frame tenfold
	}
	for _, c := range []struct {
		name, attach string
		a, b         nic.Mode
		mtu          int
	}{
		{"xdp-xdp/generic", "generic", nic.ModeXDP, nic.ModeXDP, 0},
		{"xdp-xdp/driver", "driver", nic.ModeXDP, nic.ModeXDP, 0},
		{"xdp-udp/generic", "generic", nic.ModeXDP, nic.ModeUDP, 0},
		{"xdp-udp/driver", "driver", nic.ModeXDP, nic.ModeUDP, 0},
		{"udp-udp", "auto", nic.ModeUDP, nic.ModeUDP, 0},
		{"xdp-xdp/generic/mtu-9000", "generic", nic.ModeXDP, nic.ModeXDP, 9000},
		{"xdp-xdp/driver/mtu-9000", "driver", nic.ModeXDP, nic.ModeXDP, 9000},
		{"xdp-udp/generic/mtu-9000", "generic", nic.ModeXDP, nic.ModeUDP, 9000},
	} {
		t.Run(c.name, func(t *testing.T) {
			frames, nw := million, (*nethost.Network)(nil)
			if c.mtu != 0 {
				frames, nw = million/5, nictest.JumboHosts(t, c.mtu)
			} else {
				nw = nictest.Hosts(t)
			}
			testcvar.Set(t, "nic_xdp_attach", c.attach)
			a, b := nictest.OpenOn(t, nw.Hosts[0], c.a, nicCookie), nictest.OpenOn(t, nw.Hosts[1], c.b, nicCookie)
			for _, l := range []nic.Link{a, b} {
				if s := l.Status(); s.Mode == nic.ModeXDP && s.Attach != c.attach {
					t.Fatalf("program attached in %q mode, want %q", s.Attach, c.attach)
				}
			}
			start := time.Now()
			if err := nictest.Exchange(a, b, nicCookie, frames, 64, 10*time.Second); err != nil {
				t.Fatal(err)
			}
			sa, sb := a.Stats(), b.Stats()
			if sa.RxFrames != uint64(frames) || sb.RxFrames != uint64(frames) || sa.TxFrames != uint64(frames) {
				t.Fatalf("counts: a %+v, b %+v", sa, sb)
			}
			if c.a == nic.ModeXDP && sa.Program.Redirected < uint64(frames) {
				t.Fatalf("a's program redirected %d frames of %d", sa.Program.Redirected, frames)
			}
			t.Logf("%d frames each way in %v", frames, time.Since(start).Round(time.Millisecond))
		})
	}
}

// TestNICLoss: with the XDP program dropping a tenth of the frames, the
// drops are counted and every frame that arrives is intact.
func TestNICLoss(t *testing.T) {
	nw := nictest.Hosts(t)
	a, b := nictest.OpenOn(t, nw.Hosts[0], nic.ModeUDP, nicCookie), nictest.OpenOn(t, nw.Hosts[1], nic.ModeXDP, nicCookie)
	if err := b.SetDropRate(0.1); err != nil {
		t.Fatal(err)
	}
	p, err := a.AddPeer(b.Card())
	if err != nil {
		t.Fatal(err)
	}
	const total = 20000
	var fs [1]nic.Frame
	var rx [64]nic.RxDesc
	got := 0
	last := -1
	for i := range total {
		for polls := 0; a.Alloc(fs[:]) == 0; polls++ {
			if a.Poll(); polls > 1<<24 {
				t.Fatal("no free frame")
			}
		}
		nictest.Fill(a.Bytes(fs[0]), nicCookie, uint32(i), nic.HeaderLen+16)
		if n, err := a.Send([]nic.TxDesc{{Frame: fs[0], Len: nic.HeaderLen + 16, Peer: p}}); n != 1 || err != nil {
			t.Fatal(n, err)
		}
		// Receive as we go, so no ring overflows.
		for {
			n := b.Receive(rx[:])
			for _, d := range rx[:n] {
				h, err := nic.ParseHeader(d.Data)
				if err != nil || int(h.Seq) <= last {
					t.Fatalf("frame out of order or bad: %+v, %v", h, err)
				}
				if err := nictest.Verify(d.Data, nicCookie, h.Seq, nic.HeaderLen+16); err != nil {
					t.Fatal(err)
				}
				last = int(h.Seq)
				b.Release([]nic.Frame{d.Frame})
			}
			got += n
			if n == 0 {
				break
			}
		}
	}
	time.Sleep(50 * time.Millisecond)
	for n := b.Receive(rx[:]); n > 0; n = b.Receive(rx[:]) {
		got += n
		for _, d := range rx[:n] {
			b.Release([]nic.Frame{d.Frame})
		}
	}
	dropped := b.Stats().Program.Dropped
	if got+int(dropped) != total || dropped < total/20 || dropped > total/5 {
		t.Fatalf("received %d, the program dropped %d, of %d", got, dropped, total)
	}
}

// TestNICProcessDeath: a process killed while it holds an XDP link
// leaves no program attached: the kernel detaches it when the link's
// file descriptor goes with the process.
func TestNICProcessDeath(t *testing.T) {
	nw := nictest.Hosts(t)
	h := nw.Hosts[1]
	cmd, _ := startRole(t, h, "nichold")
	attached := func() bool {
		on, err := h.XDPAttached()
		if err != nil {
			t.Fatal(err)
		}
		return on
	}
	if !attached() {
		t.Fatal("no program attached while the child holds its link")
	}
	cmd.Process.Kill()
	cmd.Wait()
	for deadline := time.Now().Add(5 * time.Second); attached(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the program stayed attached after its process died")
		}
	}
	// The queue and the port are free again.
	l := nictest.OpenOn(t, h, nic.ModeXDP, nicCookie)
	if l.Status().Mode != nic.ModeXDP {
		t.Fatal(l.Status())
	}
}

// startRole starts this test binary inside h in role (with TACHYON_NIC
// naming h's interface, and the KEY=VALUE entries env), waits for the line that says it is ready, which
// starts with the role's name, and returns it. The child is killed when
// the test ends.
func startRole(t *testing.T, h *nethost.Host, role string, env ...string) (*exec.Cmd, string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, testrole.NoTests)
	cmd.Env = append(append(os.Environ(), testrole.Setting(role), "TACHYON_NIC="+h.Iface), env...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := h.Start(cmd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	cue, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(cue, role+":") {
		t.Fatalf("%s did not start: %q, %v", role, cue, err)
	}
	return cmd, strings.TrimSpace(cue)
}

// nicHold is TestNICProcessDeath's and TestNICSharedProgram's child
// (role "nichold"): it opens an XDP link on TACHYON_NIC, as share i of n
// where TACHYON_NIC_SHARE is "i/n", says so and waits to be killed.
func nicHold() int {
	var share nic.Share
	if s := os.Getenv("TACHYON_NIC_SHARE"); s != "" {
		if _, err := fmt.Sscanf(s, "%d/%d", &share.Index, &share.Count); err != nil {
			fmt.Fprintln(os.Stderr, "nichold: TACHYON_NIC_SHARE:", err)
			return 1
		}
	}
	l, err := nic.Open(nic.Config{Interface: os.Getenv("TACHYON_NIC"), Mode: nic.ModeXDP, Cookie: nicCookie, Share: share})
	if err != nil {
		fmt.Fprintln(os.Stderr, "nichold:", err)
		return 1
	}
	fmt.Printf("nichold: %v\n", l.Card())
	time.Sleep(time.Hour)
	return 0
}

// nicEcho is the peer side of TestNICPeer (role "nicecho"): it opens a
// link on TACHYON_NIC (port TACHYON_NIC_PORT, default 7600), swaps cards
// with the client over a TCP connection to the same port number, and
// echoes frames until the client hangs up.
func nicEcho() int {
	if err := serveEcho(); err != nil {
		fmt.Fprintln(os.Stderr, "nicecho:", err)
		return 1
	}
	return 0
}

func nicPort() (uint16, error) {
	s := os.Getenv("TACHYON_NIC_PORT")
	if s == "" {
		return 7600, nil
	}
	p, err := strconv.ParseUint(s, 10, 16)
	return uint16(p), err
}

func serveEcho() error {
	port, err := nicPort()
	if err != nil {
		return err
	}
	l, err := nic.Open(nic.Config{Interface: os.Getenv("TACHYON_NIC"), Addr: netip.AddrPortFrom(netip.Addr{}, port), Cookie: nicCookie})
	if err != nil {
		return err
	}
	defer l.Close()
	ln, err := net.Listen("tcp4", fmt.Sprintf("%s:%d", l.Card().IP, port))
	if err != nil {
		return err
	}
	defer ln.Close()
	fmt.Printf("nicecho: %v %+v\n", l.Card(), l.Status()) // the client's cue
	conn, err := ln.Accept()
	if err != nil {
		return err
	}
	defer conn.Close()
	_, peer, err := swapCards(conn, l)
	if err != nil {
		return err
	}
	hungUp := make(chan struct{})
	go func() { conn.Read(make([]byte, 1)); close(hungUp) }()
	return nictest.Echo(l, peer, func() bool {
		select {
		case <-hungUp:
			return true
		default:
			return false
		}
	})
}

// TestNICPeer runs a ping-pong against an echo peer: on a real interface
// when TACHYON_NIC and TACHYON_NIC_PEER say which (start the peer first
// with TACHYON_TEST_ROLE=nicecho TACHYON_NIC=<its interface> go test
// ./hwtests), else against a peer this test starts in a second test host,
// the same way.
func TestNICPeer(t *testing.T) {
	ifc, peerIP := os.Getenv("TACHYON_NIC"), os.Getenv("TACHYON_NIC_PEER")
	port, err := nicPort()
	if err != nil {
		t.Fatal(err)
	}
	run := func(open func(func() error) error, ifc string, peer string) {
		err := open(func() error {
			l, err := nic.Open(nic.Config{Interface: ifc, Cookie: nicCookie})
			if err != nil {
				return err
			}
			defer l.Close()
			return pingPeer(t, l, peer, port)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if ifc != "" && peerIP != "" {
		if os.Geteuid() != 0 {
			t.Log("not root: the link will be UDP")
		}
		run(func(f func() error) error { return f() }, ifc, peerIP)
		return
	}
	if ifc != "" || peerIP != "" {
		t.Fatal("set both TACHYON_NIC and TACHYON_NIC_PEER, or neither")
	}
	nw := nictest.Hosts(t)
	_, cue := startRole(t, nw.Hosts[1], "nicecho")
	t.Log(cue)
	run(nw.Hosts[0].Do, nw.Hosts[0].Iface, nw.Hosts[1].IP.String())
}

// pingPeer swaps cards with the echo peer at ip and runs a ping-pong of
// 8-byte payloads, logging the one-way latency with the kernel, the
// driver and the mode beside it.
func pingPeer(t *testing.T, l nic.Link, ip string, port uint16) error {
	var conn net.Conn
	var err error
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		conn, err = net.Dial("tcp4", net.JoinHostPort(ip, strconv.Itoa(int(port))))
		if err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		return err
	}
	defer conn.Close()
	pc, peer, err := swapCards(conn, l)
	if err != nil {
		return err
	}
	p := nictest.NewPinger(l, peer, nicCookie, 8, 1<<26)
	const n = 100_000
	rtts := make([]time.Duration, n)
	for i := range rtts {
		t0 := time.Now()
		if err := p.RoundTrip(); err != nil {
			if errors.Is(err, nictest.ErrTimeout) {
				return fmt.Errorf("round trip %d: no echo; %+v", i, l.Stats())
			}
			return err
		}
		rtts[i] = time.Since(t0)
	}
	slices.Sort(rtts)
	var u unix.Utsname
	unix.Uname(&u)
	s := l.Status()
	t.Logf("kernel %s, %s driver %s, %v (attach %q, zero-copy %v) to %v (%v): one-way p50 %v, p99 %v",
		unix.ByteSliceToString(u.Release[:]), s.Interface, s.Driver, s.Mode, s.Attach, s.ZeroCopy,
		pc.AddrPort(), pc.Mode, rtts[n/2]/2, rtts[n*99/100]/2)
	return nil
}

// swapCards sends l's card over conn, reads the peer's and adds it.
func swapCards(conn net.Conn, l nic.Link) (nic.Card, nic.Peer, error) {
	fmt.Fprintln(conn, l.Card())
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return nic.Card{}, 0, err
	}
	c, err := nic.ParseCard(strings.TrimSpace(line))
	if err != nil {
		return c, 0, err
	}
	p, err := l.AddPeer(c)
	return c, p, err
}
