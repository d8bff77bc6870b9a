package nethost

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// maxMgmtHosts is the most hosts a management network holds: a /30 each
// in one /24.
const maxMgmtHosts = 63

// buildManagement gives each host of nw its management interface
// (Config.Management): a veth from the host, Prefix+"m"+i with
// 198.19.x.4i+1/30, to the router's end "m"+i with .4i+2, the host's
// default route through it. The caller cleans up on error; deleting a
// host's end deletes the router's.
func (nw *Network) buildManagement(cfg Config, x byte) error {
	router, err := newNS()
	if err != nil {
		return fmt.Errorf("nethost: creating the management router's namespace: %w", err)
	}
	nw.mgmt = router
	rt, err := netlink.NewHandleAt(router, unix.NETLINK_ROUTE)
	if err != nil {
		return fmt.Errorf("nethost: opening netlink in the management router's namespace: %w", err)
	}
	defer rt.Close()
	if err := enableForwarding(router); err != nil {
		return err
	}
	if err := setUp(rt, "lo"); err != nil {
		return fmt.Errorf("nethost: setting lo of the management router up: %w", err)
	}
	for i, host := range nw.Hosts {
		h, err := netlink.NewHandleAt(host.NS, unix.NETLINK_ROUTE)
		if err != nil {
			return fmt.Errorf("nethost: opening netlink in namespace of %s: %w", host.Name, err)
		}
		err = addMgmt(h, rt, router, host, i, x, cfg)
		h.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// addMgmt makes host's management interface, the i-th, through h in its
// namespace and rt in the router's, ns.
func addMgmt(h, rt *netlink.Handle, ns netns.NsHandle, host *Host, i int, x byte, cfg Config) error {
	name, port := cfg.Prefix+"m"+strconv.Itoa(i), "m"+strconv.Itoa(i)
	if len(name) >= unix.IFNAMSIZ {
		return fmt.Errorf("nethost: interface prefix %q too long for the management interface %s", cfg.Prefix, name)
	}
	veth := &netlink.Veth{
		LinkAttrs:     netlink.LinkAttrs{Name: name, MTU: cfg.MTU},
		PeerName:      port,
		PeerNamespace: netlink.NsFd(ns),
	}
	if err := h.LinkAdd(veth); err != nil {
		return fmt.Errorf("nethost: adding the management veth %s/%s for %s: %w", name, port, host.Name, err)
	}
	host.Mgmt = name
	mine := netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 19, x, byte(4*i + 1)}), 30)
	gw := netip.AddrFrom4([4]byte{198, 19, x, byte(4*i + 2)})
	host.MgmtPrefix = mine
	for _, end := range []struct {
		h    *netlink.Handle
		name string
		addr netip.Addr
	}{{h, name, mine.Addr()}, {rt, port, gw}} {
		link, err := end.h.LinkByName(end.name)
		if err != nil {
			return fmt.Errorf("nethost: finding %s: %w", end.name, err)
		}
		addr := &netlink.Addr{IPNet: &net.IPNet{IP: end.addr.AsSlice(), Mask: net.CIDRMask(30, 32)}}
		if err := end.h.AddrAdd(link, addr); err != nil {
			return fmt.Errorf("nethost: adding address %s to %s: %w", end.addr, end.name, err)
		}
		if err := end.h.LinkSetUp(link); err != nil {
			return fmt.Errorf("nethost: setting %s up: %w", end.name, err)
		}
	}
	for _, end := range []struct {
		h    *netlink.Handle
		name string
	}{{h, name}, {rt, port}} {
		if err := waitOperUp(end.h, end.name); err != nil {
			return fmt.Errorf("nethost: waiting for %s: %w", end.name, err)
		}
	}
	link, err := h.LinkByName(name)
	if err != nil {
		return fmt.Errorf("nethost: finding %s: %w", name, err)
	}
	if err := h.RouteAdd(&netlink.Route{LinkIndex: link.Attrs().Index, Gw: gw.AsSlice()}); err != nil {
		return fmt.Errorf("nethost: adding the default route of %s: %w", host.Name, err)
	}
	return nil
}
