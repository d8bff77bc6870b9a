package nic

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/tachyon-hpc/tachyon/cvar"
)

// Routed peers. An XDP link writes a frame's Ethernet header itself, so a
// peer off its interface's subnet needs the MAC address of the next hop:
// the gateway of the route to the peer, found in the kernel's routing
// table and then in its neighbour (ARP) table. Where the route leaves by
// another interface, or the next hop does not answer ARP within
// nic_neigh_timeout, the link sends that peer's frames through its UDP
// socket instead, which the kernel routes (Status.KernelPeers); what
// arrives from the peer still comes through the XDP program.

var neighTimeout = cvar.NewDuration("nic_neigh_timeout", time.Second,
	"Longest an XDP link waits, when a peer off its subnet is added, for the kernel to learn the MAC address of the route's next hop (ARP); after that the link sends that peer's frames through the kernel's UDP stack.",
	cvar.WithCategory("nic"), cvar.WithRange(0, int64(time.Minute)))

// routeTables reads the routing and neighbour tables of the network
// namespace the link was opened in: files under /proc/net belong to the
// namespace of the thread that opened them, and a later read from another
// thread (AddPeer may run anywhere) still shows that namespace.
type routeTables struct {
	route, arp *os.File
}

func openRouteTables() (routeTables, error) {
	r, err := os.Open("/proc/thread-self/net/route")
	if err != nil {
		return routeTables{}, fmt.Errorf("nic: the routing table: %w", err)
	}
	a, err := os.Open("/proc/thread-self/net/arp")
	if err != nil {
		r.Close()
		return routeTables{}, fmt.Errorf("nic: the neighbour table: %w", err)
	}
	return routeTables{route: r, arp: a}, nil
}

func (t routeTables) close() {
	if t.route != nil {
		t.route.Close()
		t.arp.Close()
	}
}

// read returns the whole of f, read again from its start.
func read(f *os.File) ([]byte, error) {
	var b []byte
	buf := make([]byte, 16<<10)
	for off := int64(0); ; {
		n, err := f.ReadAt(buf, off)
		b = append(b, buf[:n]...)
		off += int64(n)
		if err != nil || n == 0 {
			return b, nil // io.EOF: the table ends
		}
	}
}

// nextHop returns the address frames to dst go to first: the gateway of
// the best route to dst, or dst itself on a route with none; and the
// interface that route leaves by.
func (t routeTables) nextHop(dst netip.Addr) (hop netip.Addr, iface string, err error) {
	b, err := read(t.route)
	if err != nil {
		return netip.Addr{}, "", err
	}
	return bestRoute(b, dst)
}

// bestRoute picks dst's route from /proc/net/route's text: the longest
// prefix that holds dst, the lowest metric among equals.
func bestRoute(table []byte, dst netip.Addr) (netip.Addr, string, error) {
	const rtfUp, rtfGateway = 0x1, 0x2
	d := dst.As4()
	want := binary.LittleEndian.Uint32(d[:]) // the table's byte order
	best, bestBits, bestMetric := -1, -1, 0
	var hop netip.Addr
	var iface string
	sc := bufio.NewScanner(bytes.NewReader(table))
	for line := 0; sc.Scan(); line++ {
		f := strings.Fields(sc.Text())
		if line == 0 || len(f) < 8 {
			continue // the heading
		}
		dest, err1 := strconv.ParseUint(f[1], 16, 32)
		gw, err2 := strconv.ParseUint(f[2], 16, 32)
		flags, err3 := strconv.ParseUint(f[3], 16, 32)
		metric, err4 := strconv.Atoi(f[6])
		mask, err5 := strconv.ParseUint(f[7], 16, 32)
		if err1 != nil || err2 != nil || err3 != nil || err4 != nil || err5 != nil || flags&rtfUp == 0 {
			continue
		}
		if want&uint32(mask) != uint32(dest) {
			continue
		}
		bits := onesCount(uint32(mask))
		if bits < bestBits || bits == bestBits && metric >= bestMetric {
			continue
		}
		best, bestBits, bestMetric, iface = line, bits, metric, f[0]
		hop = dst
		if flags&rtfGateway != 0 {
			var g [4]byte
			binary.LittleEndian.PutUint32(g[:], uint32(gw))
			hop = netip.AddrFrom4(g)
		}
	}
	if best < 0 {
		return netip.Addr{}, "", fmt.Errorf("%w: no route to %v", ErrPeer, dst)
	}
	return hop, iface, nil
}

func onesCount(m uint32) int {
	n := 0
	for ; m != 0; m &= m - 1 {
		n++
	}
	return n
}

// neighbour returns ip's MAC address on iface from the neighbour table, if
// the kernel has it complete.
func (t routeTables) neighbour(iface string, ip netip.Addr) ([6]byte, bool) {
	b, err := read(t.arp)
	if err != nil {
		return [6]byte{}, false
	}
	return findNeighbour(b, iface, ip)
}

// findNeighbour reads /proc/net/arp's text: "IP address, HW type, Flags,
// HW address, Mask, Device", flag 0x2 for a complete entry.
func findNeighbour(table []byte, iface string, ip netip.Addr) ([6]byte, bool) {
	const atfCom = 0x2
	sc := bufio.NewScanner(bytes.NewReader(table))
	for line := 0; sc.Scan(); line++ {
		f := strings.Fields(sc.Text())
		if line == 0 || len(f) < 6 || f[5] != iface || f[0] != ip.String() {
			continue
		}
		flags, err := strconv.ParseUint(strings.TrimPrefix(f[2], "0x"), 16, 32)
		hw, err2 := net.ParseMAC(f[3])
		if err != nil || err2 != nil || flags&atfCom == 0 || len(hw) != 6 {
			continue
		}
		var mac [6]byte
		copy(mac[:], hw)
		return mac, mac != [6]byte{}
	}
	return [6]byte{}, false
}

// resolve returns the MAC address of hop, a neighbour on iface, asking
// the kernel to find it (a datagram to hop's discard port starts ARP)
// and waiting up to nic_neigh_timeout.
func (l *xskLink) resolve(iface string, hop netip.Addr) ([6]byte, bool) {
	if mac, ok := l.routes.neighbour(iface, hop); ok {
		return mac, true
	}
	sa := unix.SockaddrInet4{Port: 9, Addr: hop.As4()} // discard
	unix.Sendto(l.reserve, nil, unix.MSG_DONTWAIT, &sa)
	deadline := time.Now().Add(neighTimeout.Get())
	for time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
		if mac, ok := l.routes.neighbour(iface, hop); ok {
			return mac, true
		}
	}
	return [6]byte{}, false
}

// routedPeer returns how the link reaches c, off its subnet: through the
// next hop's MAC address, or (kernel) through its UDP socket, with why.
// With no route to c at all it fails with ErrPeer.
func (l *xskLink) routedPeer(c Card) (p xskPeer, why string, err error) {
	hop, iface, err := l.routes.nextHop(c.IP)
	switch {
	case err != nil:
		return xskPeer{}, "", fmt.Errorf("%w (%s's subnet is %v)", err, l.status.Interface, l.subnet)
	case iface != l.status.Interface:
		why = fmt.Sprintf("the route to %v leaves by %s, not %s", c.IP, iface, l.status.Interface)
	default:
		if mac, ok := l.resolve(iface, hop); ok {
			via := c
			via.MAC = mac
			p = newXSKPeer(l.card, via)
			p.card = c
			return p, "", nil
		}
		why = fmt.Sprintf("the next hop %v on %s did not answer ARP within %v", hop, iface, neighTimeout.Get())
	}
	p = xskPeer{card: c, kernel: true, sa: unix.RawSockaddrInet4{Family: unix.AF_INET, Addr: c.IP.As4()}}
	binary.BigEndian.PutUint16((*[2]byte)(unsafe.Pointer(&p.sa.Port))[:], c.Port)
	return p, why, nil
}
