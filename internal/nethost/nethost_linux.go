package nethost

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// impl is the Linux part of Network.
type impl struct {
	mu      sync.RWMutex // held for writing by Close, for reading while a thread joins a host
	closed  bool
	sw      netns.NsHandle // the switch namespace, with the bridge, or the router's; -1 for a pair
	swLinks []string       // the links Close deletes in sw
	mgmt    netns.NsHandle // the management network's router namespace; -1 without
}

const (
	maxHosts   = 254
	bridgeName = "br0"
)

// subnetCounter makes automatic subnets of one process differ.
var subnetCounter atomic.Uint32

// Available reports whether New can work here: nil if the caller may create
// network namespaces and the kernel has veth and bridge devices, or else an
// error whose text is a one-line reason to skip a test. It tries once, in a
// throwaway namespace, and remembers the answer.
func Available() error { return available() }

var available = sync.OnceValue(probe)

func probe() error {
	ns, err := newNS()
	if err != nil {
		if errors.Is(err, unix.EPERM) {
			return errors.New("nethost: needs root to create network namespaces (CI runs as root)")
		}
		return fmt.Errorf("nethost: cannot create network namespaces: %w", err)
	}
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns, unix.NETLINK_ROUTE)
	if err != nil {
		return fmt.Errorf("nethost: cannot open netlink in a new namespace: %w", err)
	}
	defer h.Close()
	if err := h.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "probe0"}, PeerName: "probe1"}); err != nil {
		if errors.Is(err, unix.EPERM) {
			return errors.New("nethost: needs root (CAP_NET_ADMIN) to create veth devices (CI runs as root)")
		}
		return fmt.Errorf("nethost: kernel cannot make veth devices (CONFIG_VETH): %w", err)
	}
	if err := h.LinkAdd(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "probebr"}}); err != nil {
		return fmt.Errorf("nethost: kernel cannot make bridge devices (CONFIG_BRIDGE): %w", err)
	}
	return nil
}

// newNS returns a handle to a new, unnamed network namespace. It unshares
// on a locked thread of a goroutine of its own and switches the thread back
// before unlocking it; if switching back fails, the thread stays locked and
// exits with the goroutine, so no thread is ever left in the new namespace.
func newNS() (netns.NsHandle, error) {
	type result struct {
		ns  netns.NsHandle
		err error
	}
	c := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			c <- result{-1, fmt.Errorf("getting the current network namespace: %w", err)}
			return
		}
		defer orig.Close()
		ns, err := netns.New() // unshare(CLONE_NEWNET): this thread is now in ns
		if err != nil {
			runtime.UnlockOSThread() // unshare failed, the thread did not move
			c <- result{-1, fmt.Errorf("unsharing network namespace: %w", err)}
			return
		}
		// Links made in ns from now on get no IPv6 (no link-local
		// address, router solicitations or MLD reports), so the wires
		// stay quiet. Best effort: the kernel may lack IPv6.
		_ = os.WriteFile("/proc/sys/net/ipv6/conf/default/disable_ipv6", []byte("1"), 0)
		if err := netns.Set(orig); err != nil {
			ns.Close()
			// The thread stays locked; Go terminates it when we return.
			c <- result{-1, fmt.Errorf("switching back to the original network namespace: %w", err)}
			return
		}
		runtime.UnlockOSThread()
		c <- result{ns, nil}
	}()
	r := <-c
	return r.ns, r.err
}

// New builds the network that cfg describes. On failure it deletes what it
// made and returns an error that names the failed step.
func New(cfg Config) (*Network, error) {
	if cfg.Hosts == 0 {
		cfg.Hosts = 2
	}
	if cfg.Hosts < 2 || cfg.Hosts > maxHosts {
		return nil, fmt.Errorf("nethost: Hosts is %d, must be 2 to %d", cfg.Hosts, maxHosts)
	}
	if cfg.Prefix == "" {
		cfg.Prefix = "tv"
	}
	if n := len(cfg.Prefix) + len(strconv.Itoa(cfg.Hosts-1)); n >= unix.IFNAMSIZ {
		return nil, fmt.Errorf("nethost: interface prefix %q too long: names would have %d bytes, limit %d", cfg.Prefix, n, unix.IFNAMSIZ-1)
	}
	if cfg.MTU < 0 {
		return nil, fmt.Errorf("nethost: negative MTU %d", cfg.MTU)
	}
	if cfg.Queues < 0 || cfg.Queues > 4096 {
		return nil, fmt.Errorf("nethost: Queues is %d, must be 0 to 4096", cfg.Queues)
	}
	if cfg.Routed && cfg.Hosts != 2 {
		return nil, fmt.Errorf("nethost: Routed joins two hosts, not %d", cfg.Hosts)
	}
	if cfg.Management && (cfg.Routed || cfg.Hosts > maxMgmtHosts) {
		return nil, fmt.Errorf("nethost: Management needs at most %d hosts (not %d) and no Routed", maxMgmtHosts, cfg.Hosts)
	}
	x := cfg.Subnet
	if x == 0 {
		x = byte(1 + (uint32(os.Getpid())+subnetCounter.Add(1)-1)%250)
	}

	nw := &Network{
		Subnet: netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 18, x, 0}), 24),
		impl:   impl{sw: -1, mgmt: -1},
	}
	for i := range cfg.Hosts {
		ip := netip.AddrFrom4([4]byte{198, 18, x, byte(i + 1)})
		if cfg.Routed {
			ip = netip.AddrFrom4([4]byte{198, 18 + byte(i), x, 2}) // .1 is the router's
		}
		nw.Hosts = append(nw.Hosts, &Host{
			Name:   fmt.Sprintf("n%d-host%d", x, i),
			Iface:  cfg.Prefix + strconv.Itoa(i),
			IP:     ip,
			Prefix: netip.PrefixFrom(ip, 24),
			MAC:    net.HardwareAddr{0x02, 0x00, 198, 18, x, byte(i + 1)},
			NS:     -1,
			nw:     nw,
		})
	}
	build := nw.build
	if cfg.Routed {
		build = nw.buildRouted
	}
	err := build(cfg)
	if err == nil && cfg.Management {
		err = nw.buildManagement(cfg, x)
	}
	if err != nil {
		nw.Close()
		return nil, err
	}
	return nw, nil
}

// build makes the namespaces and links of nw. The caller cleans up on error.
func (nw *Network) build(cfg Config) error {
	handles := make([]*netlink.Handle, len(nw.Hosts))
	var sw *netlink.Handle // in the switch namespace, if any
	defer func() {
		for _, h := range handles {
			if h != nil {
				h.Close()
			}
		}
		if sw != nil {
			sw.Close()
		}
	}()
	for i, host := range nw.Hosts {
		ns, err := newNS()
		if err != nil {
			return fmt.Errorf("nethost: creating namespace of %s: %w", host.Name, err)
		}
		host.NS = ns
		if handles[i], err = netlink.NewHandleAt(ns, unix.NETLINK_ROUTE); err != nil {
			return fmt.Errorf("nethost: opening netlink in namespace of %s: %w", host.Name, err)
		}
	}

	var ports []string // the bridge side of each host's veth
	if len(nw.Hosts) == 2 {
		a, b := nw.Hosts[0], nw.Hosts[1]
		veth := &netlink.Veth{
			LinkAttrs:        netlink.LinkAttrs{Name: a.Iface, HardwareAddr: a.MAC, MTU: cfg.MTU, NumRxQueues: cfg.Queues, NumTxQueues: cfg.Queues},
			PeerName:         b.Iface,
			PeerHardwareAddr: b.MAC,
			PeerNamespace:    netlink.NsFd(b.NS),
			PeerNumRxQueues:  uint32(cfg.Queues),
			PeerNumTxQueues:  uint32(cfg.Queues),
		}
		if err := handles[0].LinkAdd(veth); err != nil {
			return fmt.Errorf("nethost: adding veth %s/%s: %w", a.Iface, b.Iface, err)
		}
	} else {
		ns, err := newNS()
		if err != nil {
			return fmt.Errorf("nethost: creating switch namespace: %w", err)
		}
		nw.sw, nw.swLinks = ns, []string{bridgeName}
		if sw, err = netlink.NewHandleAt(ns, unix.NETLINK_ROUTE); err != nil {
			return fmt.Errorf("nethost: opening netlink in switch namespace: %w", err)
		}
		for i, host := range nw.Hosts {
			port := "port" + strconv.Itoa(i)
			if err := addPort(handles[i], host, port, ns, cfg); err != nil {
				return err
			}
			if err := setUp(sw, port); err != nil {
				return fmt.Errorf("nethost: setting switch port %s up: %w", port, err)
			}
			ports = append(ports, port)
		}
	}

	for i, host := range nw.Hosts {
		if err := setupHost(handles[i], host); err != nil {
			return err
		}
	}
	// Frames sent before the kernel has fully activated a link (which it
	// does asynchronously, up to a second after both ends are up) are
	// dropped, so wait for that here rather than in every test.
	for i, host := range nw.Hosts {
		if err := waitOperUp(handles[i], host.Iface); err != nil {
			return fmt.Errorf("nethost: waiting for %s of %s: %w", host.Iface, host.Name, err)
		}
	}
	for _, port := range ports {
		if err := waitOperUp(sw, port); err != nil {
			return fmt.Errorf("nethost: waiting for switch port %s: %w", port, err)
		}
	}
	if sw != nil {
		// Ports that are up when they join the bridge start forwarding
		// at once (the bridge runs no STP).
		if err := makeBridge(sw, cfg, ports, nw.Hosts); err != nil {
			return err
		}
	}

	for i, host := range nw.Hosts {
		for _, other := range nw.Hosts {
			if other == host {
				continue
			}
			err := handles[i].NeighAdd(&netlink.Neigh{
				LinkIndex:    host.Ifindex,
				Family:       netlink.FAMILY_V4,
				State:        netlink.NUD_PERMANENT,
				IP:           other.IP.AsSlice(),
				HardwareAddr: other.MAC,
			})
			if err != nil {
				return fmt.Errorf("nethost: adding neighbour %s on %s: %w", other.IP, host.Name, err)
			}
		}
	}
	return nil
}

// addPort joins host's interface, through h in its namespace, to a veth
// end named port in namespace ns (a switch's or a router's).
func addPort(h *netlink.Handle, host *Host, port string, ns netns.NsHandle, cfg Config) error {
	veth := &netlink.Veth{
		LinkAttrs:       netlink.LinkAttrs{Name: host.Iface, HardwareAddr: host.MAC, MTU: cfg.MTU, NumRxQueues: cfg.Queues, NumTxQueues: cfg.Queues},
		PeerName:        port,
		PeerNamespace:   netlink.NsFd(ns),
		PeerNumRxQueues: uint32(cfg.Queues),
		PeerNumTxQueues: uint32(cfg.Queues),
	}
	if err := h.LinkAdd(veth); err != nil {
		return fmt.Errorf("nethost: adding veth %s/%s for %s: %w", host.Iface, port, host.Name, err)
	}
	return nil
}

// makeBridge makes the bridge in the switch namespace and attaches the
// ports to it; ports[i] leads to hosts[i].
func makeBridge(sw *netlink.Handle, cfg Config, ports []string, hosts []*Host) error {
	if err := sw.LinkAdd(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: bridgeName, MTU: cfg.MTU}}); err != nil {
		return fmt.Errorf("nethost: adding bridge: %w", err)
	}
	br, err := sw.LinkByName(bridgeName)
	if err != nil {
		return fmt.Errorf("nethost: finding bridge: %w", err)
	}
	if err := sw.LinkSetUp(br); err != nil {
		return fmt.Errorf("nethost: setting bridge up: %w", err)
	}
	for i, port := range ports {
		p, err := sw.LinkByName(port)
		if err != nil {
			return fmt.Errorf("nethost: finding switch port %s: %w", port, err)
		}
		if err := sw.LinkSetMasterByIndex(p, br.Attrs().Index); err != nil {
			return fmt.Errorf("nethost: attaching %s to bridge: %w", port, err)
		}
		// A static forwarding entry, so the bridge sends frames for
		// this host only to its port, from the first frame on.
		err = sw.NeighAdd(&netlink.Neigh{
			LinkIndex:    p.Attrs().Index,
			Family:       unix.AF_BRIDGE,
			Flags:        netlink.NTF_MASTER,
			State:        netlink.NUD_NOARP,
			HardwareAddr: hosts[i].MAC,
		})
		if err != nil {
			return fmt.Errorf("nethost: adding bridge forwarding entry for %s: %w", hosts[i].Name, err)
		}
	}
	return nil
}

// setUp sets the named link up.
func setUp(h *netlink.Handle, name string) error {
	link, err := h.LinkByName(name)
	if err != nil {
		return err
	}
	return h.LinkSetUp(link)
}

// waitOperUp waits until the named link's operational state is up, that
// is, until the kernel's link watcher has handled its carrier coming on.
// The watcher activates the link's transmit queues just after it sets the
// state, while holding the RTNL lock, so waitOperUp ends with a request
// that takes that lock, to be sure the watcher is done.
func waitOperUp(h *netlink.Handle, name string) error {
	deadline := time.Now().Add(5 * time.Second)
	for {
		link, err := h.LinkByName(name)
		if err != nil {
			return err
		}
		if link.Attrs().OperState == netlink.OperUp {
			return h.LinkSetUp(link) // already up: only for the lock
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("still %v after 5s", link.Attrs().OperState)
		}
		time.Sleep(time.Millisecond)
	}
}

// setupHost brings up lo and host's interface, gives it its address and
// fills in host's Ifindex and MAC.
func setupHost(h *netlink.Handle, host *Host) error {
	lo, err := h.LinkByName("lo")
	if err != nil {
		return fmt.Errorf("nethost: finding lo of %s: %w", host.Name, err)
	}
	if err := h.LinkSetUp(lo); err != nil {
		return fmt.Errorf("nethost: setting lo of %s up: %w", host.Name, err)
	}
	link, err := h.LinkByName(host.Iface)
	if err != nil {
		return fmt.Errorf("nethost: finding %s of %s: %w", host.Iface, host.Name, err)
	}
	addr := &netlink.Addr{IPNet: &net.IPNet{
		IP:   host.IP.AsSlice(),
		Mask: net.CIDRMask(host.Prefix.Bits(), 32),
	}}
	if err := h.AddrAdd(link, addr); err != nil {
		return fmt.Errorf("nethost: adding address %s to %s of %s: %w", host.Prefix, host.Iface, host.Name, err)
	}
	if err := h.LinkSetUp(link); err != nil {
		return fmt.Errorf("nethost: setting %s of %s up: %w", host.Iface, host.Name, err)
	}
	host.Ifindex = link.Attrs().Index
	host.MAC = link.Attrs().HardwareAddr
	return nil
}

// Close deletes the network's links and closes its namespace handles, after
// which the kernel frees the namespaces, unless something still holds them:
// a socket made inside a host or a process started there. Only the first
// call does anything; later calls return nil. Close waits for threads that
// are joining a host in Do, Go or Start; Do, Go and Start fail after Close.
func (nw *Network) Close() error {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	if nw.closed {
		return nil
	}
	nw.closed = true
	var errs []error
	for _, host := range nw.Hosts {
		if host.NS < 0 {
			continue
		}
		errs = append(errs, deleteLinks(host.NS, host.Iface, host.Mgmt))
		if err := host.NS.Close(); err != nil {
			errs = append(errs, fmt.Errorf("nethost: closing namespace of %s: %w", host.Name, err))
		}
	}
	if nw.mgmt >= 0 {
		if err := nw.mgmt.Close(); err != nil {
			errs = append(errs, fmt.Errorf("nethost: closing the management router's namespace: %w", err))
		}
	}
	if nw.sw >= 0 {
		errs = append(errs, deleteLinks(nw.sw, nw.swLinks...))
		if err := nw.sw.Close(); err != nil {
			errs = append(errs, fmt.Errorf("nethost: closing switch namespace: %w", err))
		}
	}
	return errors.Join(errs...)
}

// deleteLinks deletes the named links in ns, if they are there. Deleting a
// veth end deletes its peer too, and deleting a bridge releases its ports.
func deleteLinks(ns netns.NsHandle, names ...string) error {
	h, err := netlink.NewHandleAt(ns, unix.NETLINK_ROUTE)
	if err != nil {
		return fmt.Errorf("nethost: opening netlink to delete %v: %w", names, err)
	}
	defer h.Close()
	for _, name := range names {
		if name == "" {
			continue
		}
		link, err := h.LinkByName(name)
		if err != nil {
			if _, ok := err.(netlink.LinkNotFoundError); ok {
				continue // already gone with its peer
			}
			return fmt.Errorf("nethost: finding %s to delete it: %w", name, err)
		}
		if err := h.LinkDel(link); err != nil {
			return fmt.Errorf("nethost: deleting %s: %w", name, err)
		}
	}
	return nil
}

// errGoexit is what Do and Go report when fn ends its goroutine with
// runtime.Goexit, as testing.T.FailNow does.
var errGoexit = errors.New("nethost: function called runtime.Goexit (t.FailNow or t.Fatal?) inside the host")

// Do runs fn on a new goroutine, locked to an OS thread that has joined the
// host's network namespace and a new UTS namespace whose hostname is
// h.Name, waits for fn, and returns its error.
//
// Sockets, including AF_XDP sockets, and XDP programs attached to the
// host's interface in fn belong to the host's namespace and keep working
// when used later from any goroutine; socket and interface lookups made on
// other goroutines see the caller's namespace, not the host's. Files under
// /sys/class/net show the caller's namespace even inside fn, because sysfs
// follows the namespace it was mounted in; use netlink or net.Interfaces.
//
// The thread is not returned to the Go scheduler: it exits when fn returns.
// Goroutines started by fn run on other threads, in the caller's
// namespaces.
func (h *Host) Do(fn func() error) error {
	return h.Go(fn)()
}

// Go runs fn like Do, but returns at once. The returned wait function waits
// for fn and returns its error; it may be called more than once.
func (h *Host) Go(fn func() error) (wait func() error) {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		// Never unlocked: the thread leaves the caller's namespaces and
		// Go terminates it when this goroutine ends.
		err := errGoexit
		defer func() { done <- err }()
		if e := h.enter(); e != nil {
			err = e
			return
		}
		err = fn()
	}()
	return sync.OnceValue(func() error { return <-done })
}

// enter moves the calling, locked thread into h's network namespace and a
// new UTS namespace, and sets the hostname to h.Name.
func (h *Host) enter() error {
	nw := h.nw
	nw.mu.RLock()
	if nw.closed {
		nw.mu.RUnlock()
		return fmt.Errorf("nethost: %s: network closed", h.Name)
	}
	err := netns.Set(h.NS)
	nw.mu.RUnlock()
	if err != nil {
		return fmt.Errorf("nethost: joining namespace of %s: %w", h.Name, err)
	}
	if err := unix.Unshare(unix.CLONE_NEWUTS); err != nil {
		return fmt.Errorf("nethost: unsharing UTS namespace for %s: %w", h.Name, err)
	}
	if err := unix.Sethostname([]byte(h.Name)); err != nil {
		return fmt.Errorf("nethost: setting hostname of %s: %w", h.Name, err)
	}
	return nil
}

// Start starts cmd inside the host, as cmd.Start does. The child is forked
// from a thread that has joined the host's network namespace, and Start
// adds CLONE_NEWUTS and CLONE_NEWNS to cmd.SysProcAttr.Cloneflags, so the
// child has the host's network, a UTS namespace of its own whose hostname
// is already h.Name, and a mount namespace of its own that starts as a copy
// of the caller's. The child sees the caller's /dev/shm and /sys; to have
// a private /dev/shm, or a /sys that shows the host's interfaces, it must
// make its mounts private (mount --make-rprivate /) and mount them itself.
//
// If cmd.SysProcAttr.Pdeathsig is set, which the kernel ties to the thread
// that forked the child, that thread lives until the child exits, so the
// signal comes only when the child's real parent, this process, dies.
// Wait for the child with cmd.Wait, as usual.
func (h *Host) Start(cmd *exec.Cmd) error {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Cloneflags |= unix.CLONE_NEWUTS | unix.CLONE_NEWNS
	if cmd.SysProcAttr.Pdeathsig == 0 {
		return h.Do(cmd.Start)
	}
	started := make(chan error, 2)
	wait := h.Go(func() error {
		if err := cmd.Start(); err != nil {
			started <- err
			return nil
		}
		// A pidfd stays valid and does not reap the child; it polls
		// readable when the child exits.
		pidfd, err := unix.PidfdOpen(cmd.Process.Pid, 0)
		started <- nil
		if err != nil {
			return nil // the child has exited already, or we cannot tell
		}
		defer unix.Close(pidfd)
		fds := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
		for {
			if _, err := unix.Poll(fds, -1); err != unix.EINTR {
				return nil
			}
		}
	})
	// wait fails only if the thread could not join the host, and then
	// fn never ran; otherwise fn's report comes first.
	go func() { started <- wait() }()
	return <-started
}

// XDPAttached reports whether an XDP program is attached to the host's
// interface, in any hook.
func (h *Host) XDPAttached() (bool, error) {
	nl, err := netlink.NewHandleAt(h.NS)
	if err != nil {
		return false, fmt.Errorf("nethost: netlink in %s: %w", h.Name, err)
	}
	defer nl.Close()
	lk, err := nl.LinkByName(h.Iface)
	if err != nil {
		return false, fmt.Errorf("nethost: %s in %s: %w", h.Iface, h.Name, err)
	}
	x := lk.Attrs().Xdp
	return x != nil && x.Attached, nil
}
