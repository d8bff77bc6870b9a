//go:build linux

package nic

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"os"
	"slices"
	"testing"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/tachyon-hpc/tachyon/internal/testskip"
	"golang.org/x/sys/unix"
)

// The target of the tests and the addresses around it.
var (
	xdpTestIP    = netip.MustParseAddr("10.11.12.13")
	xdpTestOther = netip.MustParseAddr("10.11.12.14")
	xdpTestSrc   = netip.MustParseAddr("10.11.12.1")
)

const (
	xdpTestPort  = 47000
	xdpTestSport = 40000
)

// xdpTestSlot is the slot the first port added to new objects gets.
const xdpTestSlot = 1

// xdpTestAdd adds ip:port with xdpTestCookie and activates it, and
// returns its slot.
func xdpTestAdd(t *testing.T, o *xdpObjects, ip netip.Addr, port uint16) uint32 {
	t.Helper()
	slot, err := o.addPort(ip, port, xdpTestCookie)
	if err != nil {
		t.Fatal(err)
	}
	if err := o.activate(port, slot); err != nil {
		t.Fatal(err)
	}
	return slot
}

// xdpTestCookie is the cookie xdpTestPayload carries where a Tachyon
// header has it.
var xdpTestCookie = binary.LittleEndian.Uint64(xdpTestPayload[offCookie : offCookie+8])

// xdpTestObjects loads the program and maps for queues queues, skipping the
// test where BPF is not allowed.
func xdpTestObjects(t *testing.T, queues int) *xdpObjects {
	t.Helper()
	if os.Geteuid() != 0 {
		testskip.Skip(t, testskip.NotRoot, "needs root for BPF (CI runs as root)")
	}
	o, err := newXDPObjects(queues)
	// EPERM is a missing capability; the verifier's rejections (EACCES,
	// EINVAL) come as an *ebpf.VerifierError and fail the test.
	var ve *ebpf.VerifierError
	if errors.Is(err, unix.EPERM) && !errors.As(err, &ve) {
		testskip.Skipf(t, testskip.NoBPF, "BPF not permitted here: %v", err)
	}
	if err != nil {
		t.Fatalf("newXDPObjects(%d): %+v", queues, err)
	}
	t.Cleanup(func() {
		if err := o.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return o
}

// xdpTestEth returns an Ethernet II header with the given ethertype.
func xdpTestEth(etherType uint16) []byte {
	b := []byte{
		0x02, 0, 0, 0, 0, 0x02, // destination MAC
		0x02, 0, 0, 0, 0, 0x01, // source MAC
		0, 0, // ethertype
	}
	binary.BigEndian.PutUint16(b[12:], etherType)
	return b
}

// xdpTestChecksum is the Internet checksum of b (even length).
func xdpTestChecksum(b []byte) uint16 {
	var s uint32
	for i := 0; i+1 < len(b); i += 2 {
		s += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	for s > 0xffff {
		s = s&0xffff + s>>16
	}
	return ^uint16(s)
}

// xdpTestIPv4 returns an Ethernet II frame carrying an IPv4 packet from
// xdpTestSrc to dst with the given protocol, raw flags+fragment-offset field,
// options (a multiple of 4 bytes) and layer 4 bytes, with a correct header
// checksum.
func xdpTestIPv4(dst netip.Addr, proto uint8, frag uint16, options, l4 []byte) []byte {
	ihl := 5 + len(options)/4
	ip := make([]byte, 4*ihl)
	ip[0] = 0x40 | byte(ihl)
	binary.BigEndian.PutUint16(ip[2:], uint16(len(ip)+len(l4)))
	binary.BigEndian.PutUint16(ip[4:], 0x1234) // identification
	binary.BigEndian.PutUint16(ip[6:], frag)
	ip[8] = 64 // TTL
	ip[9] = proto
	src, d := xdpTestSrc.As4(), dst.As4()
	copy(ip[12:], src[:])
	copy(ip[16:], d[:])
	copy(ip[20:], options)
	binary.BigEndian.PutUint16(ip[10:], xdpTestChecksum(ip))
	f := append(xdpTestEth(0x0800), ip...)
	return append(f, l4...)
}

// xdpTestUDPHeader returns a UDP header (checksum 0: none) and payload.
func xdpTestUDPHeader(sport, dport uint16, payload []byte) []byte {
	u := make([]byte, 8, 8+len(payload))
	binary.BigEndian.PutUint16(u[0:], sport)
	binary.BigEndian.PutUint16(u[2:], dport)
	binary.BigEndian.PutUint16(u[4:], uint16(8+len(payload)))
	return append(u, payload...)
}

// xdpTestUDP returns an Ethernet+IPv4+UDP frame to dst:dport with payload.
func xdpTestUDP(dst netip.Addr, dport uint16, payload []byte) []byte {
	return xdpTestIPv4(dst, 17, 0, nil, xdpTestUDPHeader(xdpTestSport, dport, payload))
}

var xdpTestPayload = []byte("tachyon xdp test payload")

// xdpTestOurs is a frame the program must take as ours.
func xdpTestOurs() []byte { return xdpTestUDP(xdpTestIP, xdpTestPort, xdpTestPayload) }

// xdpTestRun runs the program once on frame and returns its return code and
// the change of the counters.
func xdpTestRun(t *testing.T, o *xdpObjects, frame []byte) (uint32, xdpCounts) {
	t.Helper()
	before, err := o.counts(xdpTestSlot)
	if err != nil {
		t.Fatal(err)
	}
	ret, err := o.prog.Run(&ebpf.RunOptions{Data: frame})
	if err != nil {
		t.Fatalf("running the program: %v", err)
	}
	after, err := o.counts(xdpTestSlot)
	if err != nil {
		t.Fatal(err)
	}
	return ret, xdpTestDelta(before, after)
}

func xdpTestDelta(before, after xdpCounts) xdpCounts {
	return xdpCounts{
		Redirected: after.Redirected - before.Redirected,
		Passed:     after.Passed - before.Passed,
		Dropped:    after.Dropped - before.Dropped,
		Foreign:    after.Foreign - before.Foreign,
		Misqueued:  after.Misqueued - before.Misqueued,
	}
}

var (
	xdpTestOneRedirected = xdpCounts{Redirected: 1}
	xdpTestOnePassed     = xdpCounts{Passed: 1}
	xdpTestOneDropped    = xdpCounts{Dropped: 1}
	xdpTestOneForeign    = xdpCounts{Foreign: 1}
	xdpTestOneMisqueued  = xdpCounts{Misqueued: 1}
)

// xdpTestExpect runs frame and checks the return code and counter change.
func xdpTestExpect(t *testing.T, o *xdpObjects, frame []byte, wantRet uint32, wantDelta xdpCounts) {
	t.Helper()
	ret, d := xdpTestRun(t, o, frame)
	if ret != wantRet {
		t.Errorf("return code %d, want %d", ret, wantRet)
	}
	if d != wantDelta {
		t.Errorf("counters changed by %+v, want %+v", d, wantDelta)
	}
}

func TestXDPProgram(t *testing.T) {
	o := xdpTestObjects(t, 4)
	insns := xdpInstructions(o.xsks.FD(), o.queues.FD(), o.portSlots.FD(), o.slots.FD(), o.countsMap.FD(), o.pending.FD())
	t.Logf("program: %d instructions (%d BPF slots)", len(insns), insns.Size()/8)

	// Before addPort nothing is ours, not even a frame to port 0 of 0.0.0.0.
	t.Run("not configured", func(t *testing.T) {
		xdpTestExpect(t, o, xdpTestOurs(), xpActPass, xdpTestOnePassed)
		xdpTestExpect(t, o, xdpTestUDP(netip.IPv4Unspecified(), 0, xdpTestPayload), xpActPass, xdpTestOnePassed)
	})
	if slot := xdpTestAdd(t, o, xdpTestIP, xdpTestPort); slot != xdpTestSlot {
		t.Fatalf("first slot %d, want %d", slot, xdpTestSlot)
	}

	ours := xdpTestOurs()
	udpOurs := xdpTestUDPHeader(xdpTestPort, xdpTestPort, xdpTestPayload) // our port at offsets 36 and 38
	arp := append(xdpTestEth(0x0806), []byte{
		0, 1, 8, 0, 6, 4, 0, 1, // Ethernet/IPv4 request
		2, 0, 0, 0, 0, 1, 10, 11, 12, 1, // sender
		0, 0, 0, 0, 0, 0, 10, 11, 12, 13, // target: our IP
	}...)
	icmp := []byte{8, 0, 0, 0, 0, 1, 0, 1} // echo request
	binary.BigEndian.PutUint16(icmp[2:], xdpTestChecksum(icmp))
	tcp := make([]byte, 20) // TCP to our port: the port is where UDP's would be
	binary.BigEndian.PutUint16(tcp[0:], xdpTestSport)
	binary.BigEndian.PutUint16(tcp[2:], xdpTestPort)
	tcp[12] = 5 << 4
	ipv6 := xdpTestEth(0x86dd)
	ipv6 = append(ipv6, 0x60, 0, 0, 0, 0, byte(len(udpOurs)), 17, 64)
	ipv6 = append(ipv6, make([]byte, 32)...) // source and destination
	ipv6 = append(ipv6, udpOurs...)
	vlan := xdpTestEth(0x8100) // 802.1Q tag, then the IPv4 frame of ours
	vlan = append(vlan, 0, 1, 0x08, 0x00)
	vlan = append(vlan, ours[14:]...)

	cases := []struct {
		name  string
		frame []byte
		ret   uint32
		delta xdpCounts
	}{
		// Ours, with no socket on the queue: counted misqueued and passed
		// to the kernel, which gives it to the link's UDP socket.
		{"ours", ours, xpActPass, xdpTestOneMisqueued},
		{"ours with DF", xdpTestIPv4(xdpTestIP, 17, 0x4000, nil, xdpTestUDPHeader(xdpTestSport, xdpTestPort, xdpTestPayload)), xpActPass, xdpTestOneMisqueued},
		{"ours, 1400-byte payload", xdpTestUDP(xdpTestIP, xdpTestPort, append(slices.Clone(xdpTestPayload), make([]byte, 1400)...)), xpActPass, xdpTestOneMisqueued},
		// To our port without the job's cookie: dropped and counted.
		{"headers only", xdpTestUDP(xdpTestIP, xdpTestPort, nil), xpActDrop, xdpTestOneForeign},
		{"15 bytes of payload", xdpTestUDP(xdpTestIP, xdpTestPort, xdpTestPayload[:15]), xpActDrop, xdpTestOneForeign},
		{"another job's cookie", xdpTestUDP(xdpTestIP, xdpTestPort, make([]byte, 1400)), xpActDrop, xdpTestOneForeign},

		{"ARP", arp, xpActPass, xdpTestOnePassed},
		{"ICMP", xdpTestIPv4(xdpTestIP, 1, 0, nil, icmp), xpActPass, xdpTestOnePassed},
		{"TCP to our port", xdpTestIPv4(xdpTestIP, 6, 0, nil, tcp), xpActPass, xdpTestOnePassed},
		{"UDP to another port", xdpTestUDP(xdpTestIP, xdpTestPort+1, xdpTestPayload), xpActPass, xdpTestOnePassed},
		{"UDP to another IP", xdpTestUDP(xdpTestOther, xdpTestPort, xdpTestPayload), xpActPass, xdpTestOnePassed},
		{"IPv4 with options", xdpTestIPv4(xdpTestIP, 17, 0, []byte{1, 1, 1, 0}, udpOurs), xpActPass, xdpTestOnePassed},
		{"first fragment (MF)", xdpTestIPv4(xdpTestIP, 17, 0x2000, nil, udpOurs), xpActPass, xdpTestOnePassed},
		{"non-first fragment", xdpTestIPv4(xdpTestIP, 17, 0x00b9, nil, udpOurs), xpActPass, xdpTestOnePassed},
		{"non-first fragment with DF", xdpTestIPv4(xdpTestIP, 17, 0x4001, nil, udpOurs), xpActPass, xdpTestOnePassed},
		{"IPv6", ipv6, xpActPass, xdpTestOnePassed},
		{"VLAN-tagged", vlan, xpActPass, xdpTestOnePassed},
		{"41 bytes", ours[:41], xpActPass, xdpTestOnePassed},
		{"14 bytes", ours[:14], xpActPass, xdpTestOnePassed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			xdpTestExpect(t, o, c.frame, c.ret, c.delta)
		})
	}

	// A port removed is no link's.
	t.Run("removed", func(t *testing.T) {
		if err := o.removePort(xdpTestPort, xdpTestSlot); err != nil {
			t.Fatal(err)
		}
		xdpTestExpect(t, o, ours, xpActPass, xdpTestOnePassed)
		// The slot is free again.
		if slot := xdpTestAdd(t, o, xdpTestIP, xdpTestPort); slot != xdpTestSlot {
			t.Fatalf("slot %d after the removal, want %d", slot, xdpTestSlot)
		}
	})
}

func TestXDPDropRate(t *testing.T) {
	o := xdpTestObjects(t, 1)
	xdpTestAdd(t, o, xdpTestIP, xdpTestPort)
	ours := xdpTestOurs()
	other := xdpTestUDP(xdpTestIP, xdpTestPort+1, xdpTestPayload)

	t.Run("rate 1 drops all of ours", func(t *testing.T) {
		if err := o.setDropRate(xdpTestSlot, 1); err != nil {
			t.Fatal(err)
		}
		for range 100 {
			xdpTestExpect(t, o, ours, xpActDrop, xdpTestOneDropped)
		}
		xdpTestExpect(t, o, other, xpActPass, xdpTestOnePassed)
	})
	t.Run("the rate is the port's", func(t *testing.T) {
		slot := xdpTestAdd(t, o, xdpTestIP, xdpTestPort+2)
		defer o.removePort(xdpTestPort+2, slot)
		ret, err := o.prog.Run(&ebpf.RunOptions{Data: xdpTestUDP(xdpTestIP, xdpTestPort+2, xdpTestPayload)})
		if err != nil || ret != xpActPass {
			t.Fatalf("another port's frame: %d, %v; want %d", ret, err, xpActPass)
		}
		xdpTestExpect(t, o, ours, xpActDrop, xdpTestOneDropped)
	})
	t.Run("rate 0 drops none", func(t *testing.T) {
		if err := o.setDropRate(xdpTestSlot, 0); err != nil {
			t.Fatal(err)
		}
		for range 100 {
			xdpTestExpect(t, o, ours, xpActPass, xdpTestOneMisqueued)
		}
	})
	// Over 2000 runs the dropped share is within 7 standard deviations of
	// p; 0.1 also catches a reversed comparison, which 0.5 cannot.
	for _, c := range []struct{ p, min, max float64 }{{0.5, 0.35, 0.65}, {0.1, 0.05, 0.15}} {
		t.Run(fmt.Sprintf("rate %v", c.p), func(t *testing.T) {
			if err := o.setDropRate(xdpTestSlot, c.p); err != nil {
				t.Fatal(err)
			}
			const runs = 2000
			before, err := o.counts(xdpTestSlot)
			if err != nil {
				t.Fatal(err)
			}
			ret, err := o.prog.Run(&ebpf.RunOptions{Data: ours, Repeat: runs})
			if err != nil {
				t.Fatal(err)
			}
			after, err := o.counts(xdpTestSlot)
			if err != nil {
				t.Fatal(err)
			}
			d := xdpTestDelta(before, after)
			if ret != xpActDrop && ret != xpActPass {
				t.Errorf("last return code %d, want %d or %d", ret, xpActDrop, xpActPass)
			}
			// The kernel may run the program more often than asked.
			total := d.Dropped + d.Misqueued
			if total < runs || d.Passed != 0 {
				t.Fatalf("counters changed by %+v over %d runs", d, runs)
			}
			frac := float64(d.Dropped) / float64(total)
			t.Logf("dropped %d of %d (%.3f)", d.Dropped, total, frac)
			if frac < c.min || frac > c.max {
				t.Errorf("dropped %d of %d (%.3f), want %v..%v", d.Dropped, total, frac, c.min, c.max)
			}
		})
	}
	t.Run("invalid rates", func(t *testing.T) {
		if err := o.setDropRate(xdpTestSlot, 1); err != nil {
			t.Fatal(err)
		}
		for _, slot := range []uint32{0, xpSlots} {
			if err := o.setDropRate(slot, 0.5); err == nil {
				t.Errorf("setDropRate of slot %d: no error", slot)
			}
		}
		for _, p := range []float64{-0.1, 1.5, math.NaN(), math.Inf(1), math.Inf(-1)} {
			if err := o.setDropRate(xdpTestSlot, p); err == nil {
				t.Errorf("setDropRate(%v): no error", p)
			}
		}
		// A refused rate leaves the old one.
		xdpTestExpect(t, o, ours, xpActDrop, xdpTestOneDropped)
	})
}

func TestXDPDropThreshold(t *testing.T) {
	for _, c := range []struct {
		p    float64
		want uint64
	}{{0, 0}, {0.5, 1 << 31}, {0.25, 1 << 30}, {1, 1 << 32}} {
		got, err := xdpDropThreshold(c.p)
		if err != nil || got != c.want {
			t.Errorf("xdpDropThreshold(%v) = %d, %v; want %d", c.p, got, err, c.want)
		}
	}
}

func TestXDPArguments(t *testing.T) {
	if _, err := newXDPObjects(0); err == nil {
		t.Error("newXDPObjects(0): no error")
	}
	o := xdpTestObjects(t, 2)
	if _, err := o.addPort(netip.MustParseAddr("fd00::1"), xdpTestPort, 1); err == nil {
		t.Error("addPort(IPv6): no error")
	}
	if _, err := o.addPort(netip.Addr{}, xdpTestPort, 1); err == nil {
		t.Error("addPort(zero Addr): no error")
	}
	if _, err := o.addPort(xdpTestIP, 0, 1); err == nil {
		t.Error("addPort(port 0): no error")
	}
	// An IPv4-mapped IPv6 address is the IPv4 one.
	if slot := xdpTestAdd(t, o, netip.AddrFrom16(xdpTestIP.As16()), xdpTestPort); slot != xdpTestSlot {
		t.Errorf("addPort(IPv4-mapped): slot %d", slot)
	}
	xdpTestExpect(t, o, xdpTestOurs(), xpActPass, xdpTestOneMisqueued)
	for _, q := range []int{-1, 2} {
		if err := o.setSocket(q, 0, xdpTestSlot); err == nil {
			t.Errorf("setSocket(%d, 0): no error", q)
		}
	}
	// A descriptor that is not an AF_XDP socket is refused by the kernel.
	if err := o.setSocket(0, int(os.Stdin.Fd()), xdpTestSlot); err == nil {
		t.Error("setSocket(0, stdin): no error")
	}
	// Every slot taken: the next link is refused.
	for range xpSlots - 2 {
		if _, err := o.addPort(xdpTestIP, xdpTestPort+1, 1); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := o.addPort(xdpTestIP, xdpTestPort+2, 1); !errors.Is(err, ErrRefused) {
		t.Errorf("addPort with every slot taken: %v", err)
	}
}

// xdpTestSocket opens an AF_XDP socket bound in copy mode to queue 0 of the
// loopback interface, with a minimal UMEM (64 frames of 2048 bytes) and
// fill, completion and RX rings of 64 entries (not mapped: the test never
// reads them). It skips the test if the kernel refuses.
func xdpTestSocket(t *testing.T) int {
	t.Helper()
	const (
		frames    = 64
		frameSize = 2048
		ringSize  = 64
	)
	lo, err := net.InterfaceByName("lo")
	if err != nil {
		t.Fatalf("no loopback interface: %v", err)
	}
	fd, err := unix.Socket(unix.AF_XDP, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if errors.Is(err, unix.EAFNOSUPPORT) || errors.Is(err, unix.EPERM) {
		testskip.Skipf(t, testskip.NoXDP, "kernel refused an AF_XDP socket: %v", err)
	}
	if err != nil {
		t.Fatalf("AF_XDP socket: %v", err)
	}
	mem, err := unix.Mmap(-1, 0, frames*frameSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		unix.Close(fd)
		t.Fatalf("mmap of the UMEM: %v", err)
	}
	// Close the socket before unmapping the memory it has registered.
	t.Cleanup(func() {
		if err := unix.Close(fd); err != nil {
			t.Errorf("closing the AF_XDP socket: %v", err)
		}
		if err := unix.Munmap(mem); err != nil {
			t.Errorf("munmap of the UMEM: %v", err)
		}
	})
	reg := unix.XDPUmemReg{
		Addr: uint64(uintptr(unsafe.Pointer(&mem[0]))),
		Len:  uint64(len(mem)),
		Size: frameSize,
	}
	if _, _, errno := unix.Syscall6(unix.SYS_SETSOCKOPT, uintptr(fd), unix.SOL_XDP, unix.XDP_UMEM_REG,
		uintptr(unsafe.Pointer(&reg)), unsafe.Sizeof(reg), 0); errno != 0 {
		t.Fatalf("XDP_UMEM_REG: %v", errno)
	}
	for _, opt := range []struct {
		name string
		opt  int
	}{
		{"XDP_UMEM_FILL_RING", unix.XDP_UMEM_FILL_RING},
		{"XDP_UMEM_COMPLETION_RING", unix.XDP_UMEM_COMPLETION_RING},
		{"XDP_RX_RING", unix.XDP_RX_RING},
	} {
		if err := unix.SetsockoptInt(fd, unix.SOL_XDP, opt.opt, ringSize); err != nil {
			t.Fatalf("%s: %v", opt.name, err)
		}
	}
	sa := &unix.SockaddrXDP{Flags: unix.XDP_COPY, Ifindex: uint32(lo.Index), QueueID: 0}
	if err := unix.Bind(fd, sa); errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EPERM) {
		testskip.Skipf(t, testskip.NoXDP, "kernel refused binding an AF_XDP socket to lo queue 0 in copy mode: %v", err)
	} else if err != nil {
		t.Fatalf("binding an AF_XDP socket to lo queue 0 in copy mode: %v", err)
	}

	return fd
}

func TestXDPRedirect(t *testing.T) {
	o := xdpTestObjects(t, 1)
	xdpTestAdd(t, o, xdpTestIP, xdpTestPort)
	ours := xdpTestOurs()
	pending := o.pendingOf(xdpTestSlot)
	// No socket yet: counted misqueued and pending, passed.
	xdpTestExpect(t, o, ours, xpActPass, xdpTestOneMisqueued)
	if *pending != 1 {
		t.Errorf("pending count %d after one frame passed, want 1", *pending)
	}

	fd := xdpTestSocket(t)
	if err := o.setSocket(0, fd, xdpTestSlot+1); err != nil {
		t.Fatal(err)
	}
	// Another link's socket on the queue: still misqueued.
	xdpTestExpect(t, o, ours, xpActPass, xdpTestOneMisqueued)
	if err := o.setSocket(0, fd, xdpTestSlot); err != nil {
		t.Fatal(err)
	}
	xdpTestExpect(t, o, ours, xpActRedirect, xdpTestOneRedirected)
	if *pending != 2 {
		t.Errorf("pending count %d after two frames passed, want 2", *pending)
	}
	// Frames not ours still pass.
	xdpTestExpect(t, o, xdpTestUDP(xdpTestIP, xdpTestPort+1, xdpTestPayload), xpActPass, xdpTestOnePassed)
	// A drop rate of 1 drops before the redirect.
	if err := o.setDropRate(xdpTestSlot, 1); err != nil {
		t.Fatal(err)
	}
	xdpTestExpect(t, o, ours, xpActDrop, xdpTestOneDropped)
}
