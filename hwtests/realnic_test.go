//go:build linux

package hwtests

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tachyon-hpc/tachyon/engine"
	"github.com/tachyon-hpc/tachyon/internal/nethost"
	"github.com/tachyon-hpc/tachyon/internal/testskip"
	"github.com/tachyon-hpc/tachyon/nic"
	"github.com/tachyon-hpc/tachyon/nic/nictest"
)

// The engine on a real NIC: TestRealNIC/named opens an endpoint's link
// on the interface TACHYON_TEST_NIC names and logs what it got (AF_XDP
// zero-copy or copy, the program's hook, the receive queues, the
// driver, or UDP and why); with TACHYON_TEST_NIC_PEER, the address of a
// machine where the other side runs (role "nicpeer"), the two join a job
// of two ranks over the engine's network transport and exchange checked
// messages of every size class (one frame, several, rendezvous over the
// bulk lane) and a timed ping-pong. On the peer machine, first:
//
//	sudo TACHYON_TEST_ROLE=nicpeer TACHYON_TEST_NIC=eth1 go test ./hwtests
//
// then on this one:
//
//	sudo TACHYON_TEST_NIC=eth1 TACHYON_TEST_NIC_PEER=10.0.0.2 go test -run RealNIC/named -v ./hwtests
//
// nic_mode applies (TACHYON_NIC_MODE=xdp to fail rather than fall back
// to UDP). TestRealNIC/simulated runs the same subtest between two
// simulated hosts, so that CI, which has no real NIC, runs its code.

const (
	realNICEnv     = "TACHYON_TEST_NIC"      // the interface of this machine's link
	realNICPeerEnv = "TACHYON_TEST_NIC_PEER" // host[:port] of the machine running role nicpeer
	realNICPortEnv = "TACHYON_TEST_NIC_PORT" // the peer's TCP port (default realNICPort)
	realNICPort    = 7601
	realNICHello   = "tachyon-realnic 1"
)

// TestRealNIC: named on the NIC TACHYON_TEST_NIC names, simulated
// between two test hosts.
func TestRealNIC(t *testing.T) {
	t.Run("named", func(t *testing.T) {
		ifc := os.Getenv(realNICEnv)
		if ifc == "" {
			testskip.Skip(t, testskip.NoNIC, realNICEnv+" names no NIC to test on (docs/nic.md, On a real NIC)")
		}
		if os.Geteuid() != 0 {
			t.Log("not root: unless this binary has the capabilities (docs/nic.md, Without root), the link is UDP")
		}
		peer := os.Getenv(realNICPeerEnv)
		if peer == "" {
			l, _, self, err := engine.OpenNetLink(randomCookie(t), engine.NetLinkConfig{Interface: ifc, Ranks: 2})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			t.Logf("%s (no %s: no exchange)", describeLink(l.Status(), self.Card), realNICPeerEnv)
			return
		}
		if err := realNICSide(t, ifc, peerAddr(peer)); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("simulated", func(t *testing.T) {
		nw := nictest.Network(t, nethost.Config{Queues: 2})
		a, b := nw.Hosts[0], nw.Hosts[1]
		_, cue := startRole(t, b, "nicpeer", realNICEnv+"="+b.Iface, "TACHYON_NIC_MODE=xdp")
		t.Log(cue)
		exe, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd, err := a.Command(exe, "-test.run=^TestRealNIC$/^named$", "-test.v", "-test.count=1")
		if err != nil {
			t.Fatal(err)
		}
		cmd.Env = append(cmd.Env, realNICEnv+"="+a.Iface, realNICPeerEnv+"="+b.IP.String(), "TACHYON_NIC_MODE=xdp")
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err = <-done:
		case <-ctx.Done():
			cmd.Process.Kill()
			<-done
			err = ctx.Err()
		}
		t.Logf("TestRealNIC/named in host %s:\n%s", a.Name, out.String())
		if err != nil || !strings.Contains(out.String(), "--- PASS: TestRealNIC/named") {
			t.Fatalf("TestRealNIC/named against a peer in a test host: %v", err)
		}
		// A veth: AF_XDP in copy mode, the generic hook, both queues.
		for _, w := range []string{"path to the peer xdp-copy", "AF_XDP copy mode, generic hook", "sockets on queues [0 1] of 2", "driver veth"} {
			if !strings.Contains(out.String(), w) {
				t.Fatalf("the log lacks %q", w)
			}
		}
	})
}

// peerAddr returns host:port for TACHYON_TEST_NIC_PEER's value, the
// default port added where it names none.
func peerAddr(v string) string {
	if _, _, err := net.SplitHostPort(v); err == nil {
		return v
	}
	return net.JoinHostPort(v, strconv.Itoa(realNICPort))
}

func randomCookie(t testing.TB) uint64 {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return binary.LittleEndian.Uint64(b[:])
}

// describeLink says what a link is, for the log: mode, zero-copy, hook,
// queues, flow rule, driver, address and MTU, and why it fell back.
func describeLink(st nic.Status, card nic.Card) string {
	var u unix.Utsname
	unix.Uname(&u)
	mode := "UDP"
	if st.Mode == nic.ModeXDP {
		mode = "AF_XDP copy mode"
		if st.ZeroCopy {
			mode = "AF_XDP zero-copy"
		}
		mode += ", " + st.Attach + " hook"
		mode += fmt.Sprintf(", sockets on queues %v of %d", st.Queues, st.InterfaceQueues)
		if st.Steered {
			mode += ", steered by a flow rule"
		}
		if st.NAPIPolled {
			mode += ", busy-polled"
		}
	}
	driver := st.Driver
	if driver == "" {
		driver = "unknown"
	}
	s := fmt.Sprintf("link on %s: %s; driver %s, kernel %s; card %v", st.Interface, mode, driver,
		unix.ByteSliceToString(u.Release[:]), card)
	if st.Fallback != "" {
		s += "; fell back to UDP: " + st.Fallback
	}
	return s
}

// nicPeer is the other side of TestRealNIC (role "nicpeer"): it waits on
// TACHYON_TEST_NIC_PORT (7601) for one test, joins it on its link on
// TACHYON_TEST_NIC and answers its exchange.
func nicPeer() int {
	port := realNICPort
	if v := os.Getenv(realNICPortEnv); v != "" {
		p, err := strconv.Atoi(v)
		if err != nil || p < 1 || p > 65535 {
			fmt.Fprintf(os.Stderr, "nicpeer: %s=%q is no port\n", realNICPortEnv, v)
			return 2
		}
		port = p
	}
	ln, err := net.Listen("tcp", ":"+strconv.Itoa(port))
	if err != nil {
		fmt.Fprintln(os.Stderr, "nicpeer:", err)
		return 1
	}
	defer ln.Close()
	fmt.Printf("nicpeer: waiting on %v for TestRealNIC, link on %s\n", ln.Addr(), os.Getenv(realNICEnv))
	conn, err := ln.Accept()
	if err != nil {
		fmt.Fprintln(os.Stderr, "nicpeer:", err)
		return 1
	}
	defer conn.Close()
	if err := realNICJob(conn, os.Getenv(realNICEnv), 0, func(string, ...any) {}); err != nil {
		fmt.Fprintln(os.Stderr, "nicpeer:", err)
		return 1
	}
	return 0
}

// realNICSide is the test's side: it dials the peer at addr (for up to
// 10 s while nothing listens) and runs the job as rank 1.
func realNICSide(t *testing.T, ifc, addr string) error {
	var conn net.Conn
	var err error
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if conn, err = net.DialTimeout("tcp", addr, 5*time.Second); err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("dialling the peer (TestRealNIC's role nicpeer) at %s: %w", addr, err)
	}
	defer conn.Close()
	return realNICJob(conn, ifc, 1, t.Logf)
}

// realNICJob joins the job of two ranks whose other rank is at the other
// end of conn, as rank me (0 on the peer, which draws the cookie), with a
// link on ifc, runs the exchange and closes the endpoint. logf gets the
// link, the path and the figures.
func realNICJob(conn net.Conn, ifc string, me int, logf func(string, ...any)) error {
	conn.SetDeadline(time.Now().Add(90 * time.Second)) // the whole handshake; cleared below
	rd := bufio.NewReader(conn)
	line := func() (string, error) {
		s, err := rd.ReadString('\n')
		return strings.TrimSpace(s), err
	}
	// 1. The cookie, from rank 0.
	var cookie uint64
	if me == 0 {
		var b [8]byte
		if _, err := rand.Read(b[:]); err != nil {
			return err
		}
		cookie = binary.LittleEndian.Uint64(b[:])
		if _, err := fmt.Fprintf(conn, "%s %016x\n", realNICHello, cookie); err != nil {
			return err
		}
	} else {
		s, err := line()
		if err != nil {
			return fmt.Errorf("the peer's hello: %w", err)
		}
		hex, ok := strings.CutPrefix(s, realNICHello+" ")
		if !ok {
			return fmt.Errorf("the peer said %q, not %q: not TestRealNIC's nicpeer of this version", s, realNICHello)
		}
		if cookie, err = strconv.ParseUint(hex, 16, 64); err != nil {
			return fmt.Errorf("the peer's cookie %q: %w", hex, err)
		}
	}
	// 2. Links, and their peers swapped.
	link, bulk, self, err := engine.OpenNetLink(cookie, engine.NetLinkConfig{Interface: ifc, Ranks: 2})
	if err != nil {
		fmt.Fprintf(conn, "error %v\n", err)
		return err
	}
	closeLink := func() {
		link.Close()
		if bulk != nil {
			bulk.Close()
		}
	}
	if _, err := fmt.Fprintf(conn, "peer %s\n", self); err != nil {
		closeLink()
		return err
	}
	s, err := line()
	if err != nil {
		closeLink()
		return fmt.Errorf("the other side's card: %w", err)
	}
	v, ok := strings.CutPrefix(s, "peer ")
	if !ok {
		closeLink()
		return fmt.Errorf("the other side could not open its link: %s", s)
	}
	other, err := engine.ParseNetPeer(v)
	if err != nil {
		closeLink()
		return err
	}
	peers := make([]engine.NetPeer, 2)
	peers[1-me] = other
	ep, err := engine.Join(engine.JobSpec{Rank: me, Size: 2, Local: []int{me}, Link: link, Bulk: bulk,
		Cookie: cookie, Epoch: self.Epoch, Peers: peers})
	if err != nil {
		closeLink()
		return fmt.Errorf("joining: %w", err)
	}
	// 3. Both joined, the exchange, both done; the endpoint closes
	// whatever happened.
	barrier := func(what string) error {
		if _, err := fmt.Fprintf(conn, "%s\n", what); err != nil {
			return err
		}
		if s, err := line(); err != nil || s != what {
			return fmt.Errorf("waiting for the other side to be %s: %q, %v", what, s, err)
		}
		return nil
	}
	err = barrier("joined")
	if err == nil {
		conn.SetDeadline(time.Time{})
		st, card, _ := ep.NetLink()
		logf("%s; path to the peer %s (%v)", describeLink(st, card), ep.NetPath(1-me), other.Card)
		err = realNICExchange(ep, me, logf)
	}
	if err == nil {
		conn.SetDeadline(time.Now().Add(30 * time.Second))
		err = barrier("done")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return errors.Join(err, ep.CloseContext(ctx))
}

// realNICExchange runs, on rank me of a job of two: checked round trips
// at sizes from one frame to a rendezvous message over the bulk lane,
// then a timed ping-pong of 8 bytes, whose one-way p50 and p99 rank 1
// logs.
func realNICExchange(ep *engine.Endpoint, me int, logf func(string, ...any)) error {
	const ctx = 0
	other := 1 - me
	sizes := []int{8, 1400, 4000, 9000, 64 << 10, 1 << 20}
	buf := make([]byte, sizes[len(sizes)-1])
	want := make([]byte, len(buf))
	fill := func(b []byte, seed int) {
		for i := range b {
			b[i] = byte(seed*131 + i*7 + i>>8)
		}
	}
	for _, size := range sizes {
		rounds := max(4, min(200, (4<<20)/size))
		for i := range rounds {
			if me == 1 {
				fill(buf[:size], i)
				if err := ep.Send(buf[:size], other, 1, ctx, engine.Standard); err != nil {
					return fmt.Errorf("%d B, round %d: sending: %w", size, i, err)
				}
			}
			st, err := ep.Recv(buf, other, 1, ctx)
			if err != nil {
				return fmt.Errorf("%d B, round %d: receiving: %w", size, i, err)
			}
			fill(want[:size], i)
			if st.Count != size || !bytes.Equal(buf[:size], want[:size]) {
				return fmt.Errorf("%d B, round %d: received %d bytes, not those sent", size, i, st.Count)
			}
			if me == 0 {
				if err := ep.Send(buf[:size], other, 1, ctx, engine.Standard); err != nil {
					return fmt.Errorf("%d B, round %d: echoing: %w", size, i, err)
				}
			}
		}
	}
	const warm, n = 1000, 20000
	rtts := make([]time.Duration, 0, n)
	small := buf[:8]
	for i := range warm + n {
		t0 := time.Now()
		if me == 1 {
			if err := ep.Send(small, other, 2, ctx, engine.Standard); err != nil {
				return err
			}
		}
		if _, err := ep.Recv(small, other, 2, ctx); err != nil {
			return fmt.Errorf("ping-pong %d: %w", i, err)
		}
		if me == 0 {
			if err := ep.Send(small, other, 2, ctx, engine.Standard); err != nil {
				return err
			}
		} else if i >= warm {
			rtts = append(rtts, time.Since(t0))
		}
	}
	if me == 1 {
		slices.Sort(rtts)
		logf("checked round trips of %v bytes; 8 B ping-pong one-way p50 %v, p99 %v over %d round trips",
			sizes, rtts[n/2]/2, rtts[n*99/100]/2, n)
	}
	return nil
}
