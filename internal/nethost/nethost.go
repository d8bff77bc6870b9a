// Package nethost builds simulated hosts for network tests: network
// namespaces joined by veth pairs, made and torn down from Go.
//
// New creates one unnamed network namespace per host. Nothing is created in
// the caller's network namespace and nothing is bind-mounted under
// /var/run/netns: the namespaces live only as long as the file descriptors
// held in Host.NS, so a test process that is killed mid-test leaves nothing
// behind, and Network.Close, which deletes the links and closes the
// descriptors, lets the kernel free the namespaces and everything in them.
//
// With two hosts, one veth pair joins them directly: host 0 owns the end
// named Config.Prefix+"0" and host 1 the end Config.Prefix+"1". With more
// hosts, each host's veth leads to a port of a Linux bridge that lives in a
// further unnamed "switch" namespace of its own. Host i has the address
// 198.18.X.(i+1)/24 (198.18.0.0/15 is reserved for benchmarking, RFC 2544),
// where X is Config.Subnet or, by default, chosen so that networks made at
// the same time in one process differ. Host i's MAC address is
// 02:00:c6:12:X:(i+1). Every host has static (permanent) neighbour entries
// for all the others, so no ARP is needed, and IPv6 is disabled on the
// veths (where the kernel has IPv6) so that the wires carry only what the
// test sends. The links and lo are up, and New returns only once the
// kernel has activated the links, so the first frame sent is not dropped.
//
// Config.Routed puts two hosts on two subnets joined by a router
// namespace instead.
//
// Code runs inside a host through Host.Do and Host.Go, which run a function
// on an OS thread that has joined the host's network namespace and a UTS
// namespace of its own whose hostname is the host's name. Such a thread is
// never handed back to the Go scheduler: it exits with its goroutine. Other
// goroutines, and the rest of the process, stay in the caller's namespaces.
// Host.Start runs a program inside a host.
//
// Tests that use the package should call Available first and skip when it
// reports an error. The tests run as root in CI.
//
// docs/network.md says how the tests and tachyonrun -netns use these hosts.
package nethost

import (
	"net"
	"net/netip"

	"github.com/vishvananda/netns"
)

// Config says what New builds. The zero Config is two hosts joined by one
// veth pair named tv0/tv1 in an automatically chosen subnet.
type Config struct {
	// Hosts is the number of hosts, 2 to 254; 0 means 2. Two hosts are
	// joined directly by a veth pair, more through a bridge.
	Hosts int

	// Prefix starts the name of each host's interface; host i's is Prefix
	// followed by i. The default is "tv". Each interface lives in its own
	// host's namespace, so prefixes need not differ between networks.
	Prefix string

	// Subnet is X in the hosts' subnet 198.18.X.0/24. 0 means automatic: a
	// package counter plus the process id, so that networks made by one
	// process at the same time differ (up to 250 of them).
	Subnet byte

	// MTU, if not 0, is set on every interface New creates.
	MTU int

	// Queues, if not 0, is the number of receive and transmit queues of
	// every veth end New creates (ip link add ... numrxqueues N
	// numtxqueues N); 0 leaves the kernel's default of one. On a veth,
	// a frame sent on transmit queue q arrives on the peer's receive
	// queue q.
	Queues int

	// Routed, with two hosts, puts them on two subnets joined by a
	// router: host 0 is 198.18.X.2/24 and host 1 198.19.X.2/24, each with
	// a default route through the router's end of its veth (.1), in a
	// further namespace that forwards between them. Neighbours are found
	// by ARP, not given. Network.Subnet is host 0's subnet.
	Routed bool

	// Management, with at most 63 hosts and not Routed, gives every host
	// a second interface as a cluster's management network would: host
	// i's Host.Mgmt (Prefix+"m"+i) on a subnet of its own,
	// 198.19.X.4i/30, the host at .4i+1, leading to a router namespace
	// at .4i+2 that forwards between the hosts' subnets, and the host's
	// default route through it (neighbours by ARP). The interfaces New
	// makes otherwise (Iface, the fabric) then carry no default route.
	Management bool
}

// Host is one simulated host: a network namespace with lo and one Ethernet
// (veth) interface. Its fields must not be changed.
type Host struct {
	Name    string           // the host's name, also its hostname inside Do, Go and Start
	Iface   string           // the name of its interface, in its own namespace
	Ifindex int              // the interface's index, in its own namespace
	IP      netip.Addr       // the interface's IPv4 address, 198.18.X.(i+1)
	Prefix  netip.Prefix     // the address with its prefix length: 198.18.X.(i+1)/24
	MAC     net.HardwareAddr // the interface's MAC address
	NS      netns.NsHandle   // handle of the host's network namespace; closed by Network.Close
	// Mgmt is the host's management interface and MgmtPrefix its
	// address (Config.Management): "" and the zero Prefix without.
	Mgmt       string
	MgmtPrefix netip.Prefix

	nw *Network
}

// Network is a set of hosts made by New. Close releases it.
type Network struct {
	Hosts  []*Host
	Subnet netip.Prefix // 198.18.X.0/24

	impl // the platform's part
}
