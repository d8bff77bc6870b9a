package nethost

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// buildRouted makes the namespaces and links of a routed pair (Config.Routed):
// host i's veth leads to the router's end "r"+i, which has the address .1
// of host i's subnet, and each host routes everything else through it. The
// caller cleans up on error.
func (nw *Network) buildRouted(cfg Config) error {
	var handles [2]*netlink.Handle
	var rt *netlink.Handle
	defer func() {
		for _, h := range handles {
			if h != nil {
				h.Close()
			}
		}
		if rt != nil {
			rt.Close()
		}
	}()
	router, err := newNS()
	if err != nil {
		return fmt.Errorf("nethost: creating router namespace: %w", err)
	}
	nw.sw, nw.swLinks = router, []string{"r0", "r1"}
	if rt, err = netlink.NewHandleAt(router, unix.NETLINK_ROUTE); err != nil {
		return fmt.Errorf("nethost: opening netlink in router namespace: %w", err)
	}
	if err := enableForwarding(router); err != nil {
		return err
	}
	if err := setUp(rt, "lo"); err != nil {
		return fmt.Errorf("nethost: setting lo of the router up: %w", err)
	}
	for i, host := range nw.Hosts {
		ns, err := newNS()
		if err != nil {
			return fmt.Errorf("nethost: creating namespace of %s: %w", host.Name, err)
		}
		host.NS = ns
		if handles[i], err = netlink.NewHandleAt(ns, unix.NETLINK_ROUTE); err != nil {
			return fmt.Errorf("nethost: opening netlink in namespace of %s: %w", host.Name, err)
		}
		port := "r" + fmt.Sprint(i)
		if err := addPort(handles[i], host, port, router, cfg); err != nil {
			return err
		}
		gw := gateway(host)
		link, err := rt.LinkByName(port)
		if err != nil {
			return fmt.Errorf("nethost: finding router port %s: %w", port, err)
		}
		addr := &netlink.Addr{IPNet: &net.IPNet{IP: gw.AsSlice(), Mask: net.CIDRMask(host.Prefix.Bits(), 32)}}
		if err := rt.AddrAdd(link, addr); err != nil {
			return fmt.Errorf("nethost: adding address %s to router port %s: %w", gw, port, err)
		}
		if err := rt.LinkSetUp(link); err != nil {
			return fmt.Errorf("nethost: setting router port %s up: %w", port, err)
		}
		if err := setupHost(handles[i], host); err != nil {
			return err
		}
	}
	for i, host := range nw.Hosts {
		if err := waitOperUp(handles[i], host.Iface); err != nil {
			return fmt.Errorf("nethost: waiting for %s of %s: %w", host.Iface, host.Name, err)
		}
		if err := waitOperUp(rt, "r"+fmt.Sprint(i)); err != nil {
			return fmt.Errorf("nethost: waiting for router port r%d: %w", i, err)
		}
		route := &netlink.Route{LinkIndex: host.Ifindex, Gw: gateway(host).AsSlice()} // the default route
		if err := handles[i].RouteAdd(route); err != nil {
			return fmt.Errorf("nethost: adding the default route of %s: %w", host.Name, err)
		}
	}
	return nil
}

// gateway is the router's address on host's subnet: .1.
func gateway(host *Host) netip.Addr {
	a := host.Prefix.Masked().Addr().As4()
	a[3] = 1
	return netip.AddrFrom4(a)
}

// enableForwarding turns IPv4 forwarding on in ns: the sysctl files under
// /proc/sys/net belong to the namespace of the thread that opens them.
func enableForwarding(ns netns.NsHandle) error {
	c := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		// Never unlocked: the thread leaves the caller's namespace, and Go
		// ends it with this goroutine.
		if err := netns.Set(ns); err != nil {
			c <- fmt.Errorf("nethost: entering the router namespace: %w", err)
			return
		}
		if err := os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1"), 0); err != nil {
			c <- fmt.Errorf("nethost: turning forwarding on in the router: %w", err)
			return
		}
		c <- nil
	}()
	return <-c
}
