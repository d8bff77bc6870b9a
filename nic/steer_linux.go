package nic

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Steering: a NIC spreads flows over its receive queues by a hash of
// addresses and ports (RSS), whatever link listens where. A link that
// binds only some of the queues (its share, where a host runs several
// ranks) asks the NIC for a flow rule (ethtool's n-tuple filter, as
// `ethtool -N dev flow-type udp4 dst-ip A dst-port P action Q` does)
// that sends every UDP datagram for its address and port to its first
// queue, so that its frames skip the kernel path through its UDP socket.
// Drivers without n-tuple filters (veth, many virtual NICs) refuse: the
// frames then still come, through that socket, and the link says so.

// ethtool's n-tuple rule, struct ethtool_rxnfc with the
// ethtool_rx_flow_spec of a UDP/IPv4 flow, as the kernel lays it out.
type ethtoolRxnfc struct {
	cmd      uint32
	flowType uint32
	data     uint64
	fs       ethtoolFlowSpec
	ruleCnt  uint32
	_        uint32
}

type ethtoolFlowSpec struct {
	flowType   uint32
	hU         [52]byte // union ethtool_flow_union: the values
	hExt       [20]byte
	mU         [52]byte // the masks: set bits are matched
	mExt       [20]byte
	_          uint32
	ringCookie uint64 // the queue
	location   uint32
	_          uint32
}

const (
	ethtoolRxClsLocAny = 0xffffffff // RX_CLS_LOC_ANY: the driver picks the rule's place
	// Offsets in struct ethtool_tcpip4_spec.
	tcpip4Dst  = 4
	tcpip4PDst = 10
)

// steer asks the NIC ifc to send UDP datagrams for ap to receive queue q
// and returns the rule's location, for unsteer; fd is a socket of the
// interface's network namespace (ethtoolSocket).
func steer(fd int, ifc string, ap netip.AddrPort, q int) (uint32, error) {
	var r ethtoolRxnfc
	r.cmd = unix.ETHTOOL_SRXCLSRLINS
	r.fs.flowType = unix.UDP_V4_FLOW
	a := ap.Addr().As4()
	copy(r.fs.hU[tcpip4Dst:], a[:])
	binary.BigEndian.PutUint16(r.fs.hU[tcpip4PDst:], ap.Port())
	copy(r.fs.mU[tcpip4Dst:], []byte{0xff, 0xff, 0xff, 0xff})
	copy(r.fs.mU[tcpip4PDst:], []byte{0xff, 0xff})
	r.fs.ringCookie = uint64(q)
	r.fs.location = ethtoolRxClsLocAny
	if err := ethtoolIoctl(fd, ifc, unsafe.Pointer(&r)); err != nil {
		return 0, fmt.Errorf("steering %v to queue %d of %s (ethtool -N): %w", ap, q, ifc, err)
	}
	return r.fs.location, nil
}

// unsteer removes the rule steer put at loc.
func unsteer(fd int, ifc string, loc uint32) error {
	var r ethtoolRxnfc
	r.cmd = unix.ETHTOOL_SRXCLSRLDEL
	r.fs.location = loc
	return ethtoolIoctl(fd, ifc, unsafe.Pointer(&r))
}

// ethtoolSocket returns a socket for ethtool requests in the calling
// thread's network namespace, which it keeps: requests name the
// interface, and a later call may come from another thread.
func ethtoolSocket() (int, error) {
	return unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
}

// ethtoolIoctl makes the SIOCETHTOOL request data on interface ifc
// through fd.
func ethtoolIoctl(fd int, ifc string, data unsafe.Pointer) error {
	var ifr struct {
		name [unix.IFNAMSIZ]byte
		data uintptr
		_    [16]byte
	}
	copy(ifr.name[:], ifc)
	ifr.data = uintptr(data)
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&ifr))); e != 0 {
		return e
	}
	return nil
}
