package nethost

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tachyon-hpc/tachyon/internal/testskip"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

func skipUnlessAvailable(t *testing.T) {
	t.Helper()
	if err := Available(); err != nil {
		testskip.Skip(t, testskip.NoNamespaces, err)
	}
}

// newNet makes a network and closes it at the end of the test.
func newNet(t *testing.T, cfg Config) *Network {
	t.Helper()
	nw, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := nw.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return nw
}

// rootIfaces returns the names of the interfaces the test process sees.
func rootIfaces(t *testing.T) []string {
	t.Helper()
	ifs, err := net.Interfaces()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, ifc := range ifs {
		names = append(names, ifc.Name)
	}
	slices.Sort(names)
	return names
}

// ifaceView is what code inside a host sees of its interfaces.
type ifaceView struct {
	names    []string
	addrs    []string // of the host's interface
	mtu      int
	mac      string
	hostname string
	neigh    map[string]string // IP -> MAC, permanent entries only
}

func look(h *Host) (ifaceView, error) {
	var v ifaceView
	err := h.Do(func() error {
		ifs, err := net.Interfaces()
		if err != nil {
			return err
		}
		for _, ifc := range ifs {
			v.names = append(v.names, ifc.Name)
		}
		slices.Sort(v.names)
		ifc, err := net.InterfaceByName(h.Iface)
		if err != nil {
			return err
		}
		v.mtu, v.mac = ifc.MTU, ifc.HardwareAddr.String()
		addrs, err := ifc.Addrs()
		if err != nil {
			return err
		}
		for _, a := range addrs {
			v.addrs = append(v.addrs, a.String())
		}
		if v.hostname, err = os.Hostname(); err != nil {
			return err
		}
		neigh, err := netlink.NeighList(h.Ifindex, netlink.FAMILY_V4)
		if err != nil {
			return err
		}
		v.neigh = map[string]string{}
		for _, n := range neigh {
			if n.State&netlink.NUD_PERMANENT != 0 {
				v.neigh[n.IP.String()] = n.HardwareAddr.String()
			}
		}
		return nil
	})
	return v, err
}

// openFDs returns the number of open file descriptors of the process.
func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

func TestPair(t *testing.T) {
	skipUnlessAvailable(t)
	before := rootIfaces(t)
	fds := openFDs(t)
	rootName, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}

	nw, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer nw.Close()
	if got := rootIfaces(t); !slices.Equal(got, before) {
		t.Errorf("root namespace interfaces changed by New: before %v, after %v", before, got)
	}
	if len(nw.Hosts) != 2 {
		t.Fatalf("got %d hosts, want 2", len(nw.Hosts))
	}
	x := nw.Subnet.Addr().As4()[2]
	if x == 0 || nw.Subnet.Bits() != 24 || !netip.MustParsePrefix("198.18.0.0/15").Contains(nw.Subnet.Addr()) {
		t.Errorf("Subnet = %v, want 198.18.X.0/24 with X in 1..250", nw.Subnet)
	}
	for i, h := range nw.Hosts {
		wantIP := netip.AddrFrom4([4]byte{198, 18, x, byte(i + 1)})
		if h.IP != wantIP || h.Prefix != netip.PrefixFrom(wantIP, 24) {
			t.Errorf("host %d: IP %v Prefix %v, want %v/24", i, h.IP, h.Prefix, wantIP)
		}
		if want := fmt.Sprintf("tv%d", i); h.Iface != want {
			t.Errorf("host %d: Iface %q, want %q", i, h.Iface, want)
		}
		if h.Ifindex <= 0 || len(h.MAC) != 6 || !h.NS.IsOpen() {
			t.Errorf("host %d: Ifindex %d MAC %v NS %v", i, h.Ifindex, h.MAC, h.NS)
		}
		if slices.Contains(before, h.Iface) {
			t.Errorf("root namespace has %s before the test; cannot check isolation", h.Iface)
		}

		v, err := look(h)
		if err != nil {
			t.Fatalf("host %d: %v", i, err)
		}
		if want := []string{"lo", h.Iface}; !slices.Equal(v.names, want) {
			t.Errorf("host %d sees interfaces %v, want %v", i, v.names, want)
		}
		if want := []string{h.Prefix.String()}; !slices.Equal(v.addrs, want) {
			t.Errorf("host %d: %s has addresses %v, want %v (and no IPv6)", i, h.Iface, v.addrs, want)
		}
		if v.mac != h.MAC.String() {
			t.Errorf("host %d: %s has MAC %s, Host.MAC is %s", i, h.Iface, v.mac, h.MAC)
		}
		if v.hostname != h.Name {
			t.Errorf("host %d: hostname inside Do is %q, want %q", i, v.hostname, h.Name)
		}
		other := nw.Hosts[1-i]
		if want := map[string]string{other.IP.String(): other.MAC.String()}; fmt.Sprint(v.neigh) != fmt.Sprint(want) {
			t.Errorf("host %d: permanent neighbours %v, want %v", i, v.neigh, want)
		}
	}
	if nw.Hosts[0].Name == nw.Hosts[1].Name {
		t.Errorf("both hosts are named %q", nw.Hosts[0].Name)
	}
	if got, _ := os.Hostname(); got != rootName {
		t.Errorf("process hostname changed from %q to %q", rootName, got)
	}

	if err := nw.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := nw.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if got := rootIfaces(t); !slices.Equal(got, before) {
		t.Errorf("root namespace interfaces changed after Close: before %v, after %v", before, got)
	}
	if got := openFDs(t); got != fds {
		t.Errorf("%d file descriptors open before New, %d after Close", fds, got)
	}
	for _, h := range nw.Hosts {
		if h.NS.IsOpen() {
			t.Errorf("%s: NS still open after Close", h.Name)
		}
	}
	if err := nw.Hosts[0].Do(func() error { return nil }); err == nil {
		t.Error("Do after Close succeeded")
	}
}

// sendUDP sends one datagram from each host to each other host, with all
// receivers and senders running at once, and checks that each receiver gets
// each datagram, from the right source.
func sendUDP(t *testing.T, hosts []*Host) {
	t.Helper()
	const port = 9999
	ready := make(chan error, len(hosts)) // nil, or why a receiver is not listening
	var waits []func() error
	for _, rx := range hosts {
		waits = append(waits, rx.Go(func() error {
			c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: rx.IP.AsSlice(), Port: port})
			ready <- err
			if err != nil {
				return err
			}
			defer c.Close()
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			want := map[string]bool{}
			for _, tx := range hosts {
				if tx != rx {
					want[fmt.Sprintf("from %s to %s via %v", tx.Name, rx.Name, tx.IP)] = true
				}
			}
			buf := make([]byte, 1500)
			for len(want) > 0 {
				n, from, err := c.ReadFromUDPAddrPort(buf)
				if err != nil {
					return fmt.Errorf("%s: still waiting for %v: %w", rx.Name, want, err)
				}
				msg := string(buf[:n]) + " via " + from.Addr().String()
				if !want[msg] {
					return fmt.Errorf("%s: unexpected datagram %q", rx.Name, msg)
				}
				delete(want, msg)
			}
			return nil
		}))
	}
	var notReady error
	for range hosts {
		if err := <-ready; err != nil {
			notReady = err
		}
	}
	if notReady != nil {
		for _, wait := range waits {
			wait() // the other receivers time out
		}
		t.Fatalf("receiver not listening: %v", notReady)
	}
	for _, tx := range hosts {
		waits = append(waits, tx.Go(func() error {
			for _, rx := range hosts {
				if rx == tx {
					continue
				}
				c, err := net.DialUDP("udp4", nil, &net.UDPAddr{IP: rx.IP.AsSlice(), Port: port})
				if err != nil {
					return err
				}
				_, err = fmt.Fprintf(c, "from %s to %s", tx.Name, rx.Name)
				c.Close()
				if err != nil {
					return err
				}
			}
			return nil
		}))
	}
	for _, wait := range waits {
		if err := wait(); err != nil {
			t.Error(err)
		}
	}
}

func TestPairUDP(t *testing.T) {
	skipUnlessAvailable(t)
	t.Parallel()
	nw := newNet(t, Config{})
	sendUDP(t, nw.Hosts)
}

// TestRouted: two hosts on two subnets reach each other through the
// router, neighbours found by ARP; Close deletes the router's links.
func TestRouted(t *testing.T) {
	skipUnlessAvailable(t)
	t.Parallel()
	nw := newNet(t, Config{Routed: true, Prefix: "rt"})
	a, b := nw.Hosts[0], nw.Hosts[1]
	if a.Prefix.Masked() == b.Prefix.Masked() || !nw.Subnet.Contains(a.IP) || nw.Subnet.Contains(b.IP) {
		t.Fatalf("hosts %v and %v, subnet %v: want two subnets, the first host's given", a.Prefix, b.Prefix, nw.Subnet)
	}
	sendUDP(t, nw.Hosts)
	if _, err := New(Config{Hosts: 3, Routed: true}); err == nil {
		t.Error("a routed network of three hosts was made")
	}
}

func TestSwitch(t *testing.T) {
	skipUnlessAvailable(t)
	before := rootIfaces(t)
	nw := newNet(t, Config{Hosts: 3, Prefix: "sw"})
	if got := rootIfaces(t); !slices.Equal(got, before) {
		t.Errorf("root namespace interfaces changed by New: before %v, after %v", before, got)
	}
	if len(nw.Hosts) != 3 {
		t.Fatalf("got %d hosts", len(nw.Hosts))
	}
	for i, h := range nw.Hosts {
		if want := netip.AddrFrom4([4]byte{198, 18, nw.Subnet.Addr().As4()[2], byte(i + 1)}); h.IP != want {
			t.Errorf("host %d has IP %v, want %v", i, h.IP, want)
		}
		v, err := look(h)
		if err != nil {
			t.Fatal(err)
		}
		if want := []string{"lo", fmt.Sprintf("sw%d", i)}; !slices.Equal(v.names, want) {
			t.Errorf("host %d sees interfaces %v, want %v", i, v.names, want)
		}
		want := map[string]string{}
		for _, o := range nw.Hosts {
			if o != h {
				want[o.IP.String()] = o.MAC.String()
			}
		}
		if fmt.Sprint(v.neigh) != fmt.Sprint(want) {
			t.Errorf("host %d: permanent neighbours %v, want %v", i, v.neigh, want)
		}
	}
	sendUDP(t, nw.Hosts)
	if err := nw.Close(); err != nil {
		t.Fatal(err)
	}
	if got := rootIfaces(t); !slices.Equal(got, before) {
		t.Errorf("root namespace interfaces changed after Close: before %v, after %v", before, got)
	}
}

func TestConfig(t *testing.T) {
	skipUnlessAvailable(t)
	t.Parallel()
	nw := newNet(t, Config{Subnet: 77, MTU: 9000, Prefix: "xq"})
	for i, h := range nw.Hosts {
		if want := netip.AddrFrom4([4]byte{198, 18, 77, byte(i + 1)}); h.IP != want {
			t.Errorf("host %d: IP %v, want %v", i, h.IP, want)
		}
		v, err := look(h)
		if err != nil {
			t.Fatal(err)
		}
		if v.mtu != 9000 {
			t.Errorf("host %d: MTU %d, want 9000", i, v.mtu)
		}
		if !slices.Contains(v.names, fmt.Sprintf("xq%d", i)) {
			t.Errorf("host %d: interfaces %v", i, v.names)
		}
	}
	sendUDP(t, nw.Hosts)

	for _, bad := range []Config{{Hosts: 1}, {Hosts: 255}, {Prefix: "fifteencharsxxx"}, {MTU: -1}} {
		if nw, err := New(bad); err == nil {
			nw.Close()
			t.Errorf("New(%+v) succeeded", bad)
		}
	}
}

func TestConcurrentSubnets(t *testing.T) {
	skipUnlessAvailable(t)
	t.Parallel()
	const n = 4
	nets := make([]*Network, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { nets[i], errs[i] = New(Config{}) })
	}
	wg.Wait()
	seen := map[netip.Prefix]bool{}
	for i := range n {
		if errs[i] != nil {
			t.Error(errs[i])
			continue
		}
		defer nets[i].Close()
		if seen[nets[i].Subnet] {
			t.Errorf("subnet %v used twice", nets[i].Subnet)
		}
		seen[nets[i].Subnet] = true
	}
	for _, nw := range nets {
		if nw != nil {
			sendUDP(t, nw.Hosts)
		}
	}
}

// TestThreadsStayHome checks that threads used by Do do not come back to
// other goroutines: after many Do calls, goroutines locked to threads still
// find the caller's network namespace and hostname.
func TestThreadsStayHome(t *testing.T) {
	skipUnlessAvailable(t)
	nw := newNet(t, Config{})
	rootNS, err := netns.Get()
	if err != nil {
		t.Fatal(err)
	}
	defer rootNS.Close()
	rootName, _ := os.Hostname()

	for range 50 {
		if err := nw.Hosts[0].Do(func() error { return nil }); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	for range 4 * runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			ns, err := netns.Get()
			name, _ := os.Hostname()
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				t.Error(err)
				return
			}
			defer ns.Close()
			if !ns.Equal(rootNS) || name != rootName {
				t.Errorf("thread %d is in namespace %v with hostname %q", unix.Gettid(), ns.UniqueId(), name)
			}
		})
		time.Sleep(time.Millisecond)
	}
	wg.Wait()
}

func TestDoErrors(t *testing.T) {
	skipUnlessAvailable(t)
	t.Parallel()
	nw := newNet(t, Config{})
	sentinel := errors.New("sentinel")
	if err := nw.Hosts[1].Do(func() error { return sentinel }); err != sentinel {
		t.Errorf("Do returned %v, want fn's error", err)
	}
	if err := nw.Hosts[1].Do(func() error { runtime.Goexit(); return nil }); err == nil {
		t.Error("Do with Goexit returned nil")
	}
	wait := nw.Hosts[0].Go(func() error { return sentinel })
	if err := wait(); err != sentinel {
		t.Errorf("first wait: %v", err)
	}
	if err := wait(); err != sentinel {
		t.Errorf("second wait: %v", err)
	}
}

// readNetDev returns the interface names in /proc/net/dev output.
func readNetDev(out string) []string {
	var names []string
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		name, _, ok := strings.Cut(sc.Text(), ":")
		if ok && !strings.Contains(name, "|") {
			names = append(names, strings.TrimSpace(name))
		}
	}
	slices.Sort(names)
	return names
}

func TestStart(t *testing.T) {
	skipUnlessAvailable(t)
	t.Parallel()
	nw := newNet(t, Config{})
	rootMnt, err := os.Readlink("/proc/self/ns/mnt")
	if err != nil {
		t.Fatal(err)
	}
	for _, pdeath := range []syscall.Signal{0, syscall.SIGKILL} {
		h := nw.Hosts[1]
		cmd := exec.Command("/bin/sh", "-c", "sleep 0.2; readlink /proc/self/ns/mnt; cat /proc/sys/kernel/hostname; cat /proc/net/dev")
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: pdeath}
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := h.Start(cmd); err != nil {
			t.Fatal(err)
		}
		if err := cmd.Wait(); err != nil {
			t.Fatalf("pdeathsig %v: %v: %s", pdeath, err, out.String())
		}
		mnt, rest, _ := strings.Cut(out.String(), "\n")
		hostname, netdev, _ := strings.Cut(rest, "\n")
		if mnt == rootMnt {
			t.Errorf("child is in the caller's mount namespace %s", mnt)
		}
		if hostname != h.Name {
			t.Errorf("child's hostname is %q, want %q", hostname, h.Name)
		}
		if got, want := readNetDev(netdev), []string{"lo", h.Iface}; !slices.Equal(got, want) {
			t.Errorf("child sees interfaces %v, want %v:\n%s", got, want, netdev)
		}
	}
	if got := readNetDev(mustRead(t, "/proc/net/dev")); slices.Contains(got, "tv1") {
		t.Errorf("root namespace has tv1: %v", got)
	}
}

func mustRead(t *testing.T, name string) string {
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestSendAtOnce sends right after New, on many networks made at the same
// time: New must not return before the links can carry frames. (Frames sent
// too early are dropped; this test catches that only some of the time.)
func TestSendAtOnce(t *testing.T) {
	skipUnlessAvailable(t)
	t.Parallel()
	var wg sync.WaitGroup
	for k := range 8 {
		wg.Go(func() {
			for range 4 {
				nw, err := New(Config{Hosts: 2 + k%2})
				if err != nil {
					t.Error(err)
					return
				}
				a, b := nw.Hosts[0], nw.Hosts[1]
				ready := make(chan error, 1)
				wait := b.Go(func() error {
					c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: b.IP.AsSlice(), Port: 7})
					ready <- err
					if err != nil {
						return err
					}
					defer c.Close()
					c.SetReadDeadline(time.Now().Add(time.Second))
					if _, _, err := c.ReadFrom(make([]byte, 64)); err != nil {
						return fmt.Errorf("%d hosts: datagram sent right after New lost: %w", len(nw.Hosts), err)
					}
					return nil
				})
				if err := <-ready; err == nil {
					err := a.Do(func() error {
						c, err := net.DialUDP("udp4", nil, &net.UDPAddr{IP: b.IP.AsSlice(), Port: 7})
						if err != nil {
							return err
						}
						defer c.Close()
						_, err = c.Write([]byte("now"))
						return err
					})
					if err != nil {
						t.Error(err)
					}
				}
				if err := wait(); err != nil {
					t.Error(err)
				}
				if err := nw.Close(); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
}

func TestMain(m *testing.M) {
	EnterMain()
	os.Exit(m.Run())
}

// TestCommand: a program run through the shim (Host.Command) runs on the
// host: its network, its name, a /dev/shm of its own and a /sys that
// shows its interfaces; PMI_FD's connection comes along.
func TestCommand(t *testing.T) {
	skipUnlessAvailable(t)
	nw := newNet(t, Config{})
	h := nw.Hosts[1]
	marker := fmt.Sprintf("/dev/shm/nethost-test-%d", os.Getpid())
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	cmd, err := h.Command("sh", "-c", "hostname; ls /sys/class/net; cat /proc/net/dev | tail -n +3 | cut -d: -f1; touch "+marker+"; echo pmi >&$PMI_FD")
	if err != nil {
		t.Fatal(err)
	}
	cmd.ExtraFiles = []*os.File{nil, nil, nil, nil, w} // fd 7
	cmd.Env = append(cmd.Env, "PMI_FD=7")
	out, err := cmd.CombinedOutput()
	w.Close()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	lines := strings.Fields(string(out))
	if len(lines) < 5 || lines[0] != h.Name {
		t.Fatalf("output %q: want the host's name first", out)
	}
	for _, want := range []string{h.Iface, "lo"} {
		if strings.Count(string(out), want) < 2 { // in /sys and in /proc/net/dev
			t.Errorf("%s missing from %q", want, out)
		}
	}
	if strings.Contains(string(out), "eth0") {
		t.Errorf("the caller's interface shows inside the host: %q", out)
	}
	if _, err := os.Stat(marker); err == nil {
		os.Remove(marker)
		t.Error("a file in the host's /dev/shm appeared in the caller's")
	}
	got := make([]byte, 16)
	n, _ := r.Read(got)
	if string(got[:n]) != "pmi\n" {
		t.Errorf("PMI_FD's connection: read %q", got[:n])
	}
}

// TestManagement: each host has a management interface on a /30 of its
// own with the default route through the router, and the fabric still
// joins the hosts; a host reaches another's management address through
// the router; Close deletes it all.
func TestManagement(t *testing.T) {
	skipUnlessAvailable(t)
	before := rootIfaces(t)
	nw := newNet(t, Config{Hosts: 3, Prefix: "mg", Management: true})
	if got := rootIfaces(t); !slices.Equal(got, before) {
		t.Errorf("root namespace interfaces changed by New: before %v, after %v", before, got)
	}
	for i, h := range nw.Hosts {
		if h.Mgmt != fmt.Sprintf("mgm%d", i) || h.MgmtPrefix.Bits() != 30 || h.MgmtPrefix.Masked().Contains(nw.Hosts[(i+1)%3].MgmtPrefix.Addr()) {
			t.Fatalf("host %d: management %s %v", i, h.Mgmt, h.MgmtPrefix)
		}
		err := h.Do(func() error {
			b, err := os.ReadFile("/proc/thread-self/net/route")
			if err != nil {
				return err
			}
			for _, line := range strings.Split(string(b), "\n")[1:] {
				if f := strings.Fields(line); len(f) > 2 && f[1] == "00000000" {
					if f[0] != h.Mgmt {
						return fmt.Errorf("default route on %s, not %s", f[0], h.Mgmt)
					}
					return nil
				}
			}
			return fmt.Errorf("no default route:\n%s", b)
		})
		if err != nil {
			t.Fatalf("host %d: %v", i, err)
		}
	}
	sendUDP(t, nw.Hosts)
	a, b := nw.Hosts[0], nw.Hosts[2]
	to := netip.AddrPortFrom(b.MgmtPrefix.Addr(), 9998)
	got := make(chan error, 1)
	wait := b.Go(func() error {
		c, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(to))
		got <- err
		if err != nil {
			return err
		}
		defer c.Close()
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		buf := make([]byte, 64)
		n, from, err := c.ReadFromUDPAddrPort(buf)
		if err != nil {
			return err
		}
		if string(buf[:n]) != "over management" || from.Addr() != a.MgmtPrefix.Addr() {
			return fmt.Errorf("got %q from %v", buf[:n], from)
		}
		return nil
	})
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	err := a.Do(func() error {
		c, err := net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(to))
		if err != nil {
			return err
		}
		defer c.Close()
		// The first may wait for ARP at the router; once one arrived and
		// the receiver closed, the next are refused.
		for i := range 10 {
			if _, err := c.Write([]byte("over management")); err != nil {
				if i == 0 {
					return err
				}
				return nil
			}
			time.Sleep(20 * time.Millisecond)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := wait(); err != nil {
		t.Fatalf("through the management router: %v", err)
	}
	if _, err := New(Config{Hosts: 2, Routed: true, Management: true}); err == nil {
		t.Error("a routed network with management was made")
	}
}
