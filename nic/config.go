package nic

import (
	"errors"
	"net/netip"
)

// Config says where a link opens.
type Config struct {
	// Interface is the network interface ("eth0"). An XDP link needs
	// one; a UDP link bound to none sends by the kernel's routes.
	Interface string
	// Addr is the local IPv4 address and UDP port. A zero address takes
	// the interface's first IPv4 address (a UDP link without an
	// interface binds every address); port 0 lets the kernel choose.
	Addr netip.AddrPort
	// Queues are the NIC receive queues an XDP link binds, a socket on
	// each; nil takes the link's share of every queue of the interface
	// (Share). Frames for the link that arrive on a queue where it has
	// no socket go through the kernel to its UDP socket, which the link
	// reads too: slower, never lost; steer them (docs/nic.md).
	Queues []int
	// Share is the link's place among the links of this host that share
	// the interface, a job's ranks there: the link takes the queues q
	// with q % Count == Index, and none where there are fewer queues
	// than links (Open then refuses AF_XDP: ErrRefused). The zero value
	// is one link alone, which takes every queue no other link holds.
	Share Share
	// Mode: ModeAuto takes the control variable nic_mode.
	Mode Mode
	// Cookie is the job's: frames with another are dropped on receive.
	Cookie uint64
	// Chosen says why the link is on Interface (InterfaceChoice.Why), for
	// Status to tell: "" where the caller does not say.
	Chosen string
}

// Share is a link's place among Count links on one host and interface.
type Share struct{ Index, Count int }

// Errors of Open, each wrapped with its cause. In ModeAuto Open falls
// back to UDP on ErrNoPrivilege, ErrNoXSK and ErrRefused, and reports
// the reason in Status.Fallback.
var (
	ErrNoPrivilege = errors.New("nic: AF_XDP needs root, or CAP_NET_RAW, CAP_NET_ADMIN, CAP_BPF and CAP_IPC_LOCK (or a memlock limit above the UMEM)")
	ErrNoXSK       = errors.New("nic: this kernel has no AF_XDP sockets (CONFIG_XDP_SOCKETS)")
	ErrRefused     = errors.New("nic: the interface refused AF_XDP")
	ErrInterface   = errors.New("nic: interface unusable")
	ErrConfig      = errors.New("nic: invalid configuration")
	ErrNotLinux    = errors.New("nic: AF_XDP and the UDP fallback need Linux")
)
