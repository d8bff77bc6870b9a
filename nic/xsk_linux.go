package nic

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"
	"unsafe"

	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/tachyon-hpc/tachyon/asm"
)

// An XDP link, the way a frame goes:
//
// Receive: the NIC (or veth) receives a frame into memory the kernel took
// from the fill ring; the XDP program matches it as Tachyon's (IPv4 UDP
// to this link's address and port) and redirects it to the socket of its
// receive queue; the kernel (copy mode) copies it into a UMEM frame taken
// from the fill ring, or (zero-copy) the driver received it there, and
// puts the frame on the receive ring. Receive reads the ring, checks the
// headers, hands the frame to the caller; Release puts it back on the
// fill ring.
//
// Send: Alloc takes a frame off the free list; the caller writes its
// Tachyon frame at Bytes; Send writes the Ethernet, IPv4 and UDP headers
// from the peer's template in front, puts the frame on the transmit ring
// and, if the kernel asks (XDP_RING_NEED_WAKEUP, always in copy mode),
// kicks it with a non-blocking sendto. When the frame has gone, the
// kernel puts it on the completion ring; Alloc or Poll takes it back to
// the free list, or to the caller if it was sent with Keep.

// xskLink is a Link over an AF_XDP socket.
type xskLink struct {
	// The hot fields, in the order Receive and Send use them.
	rx     descRing
	fill   addrRing
	tx     descRing
	comp   addrRing
	umem   []byte
	shift  uint // log2 of the frame size
	mtu    int
	cookie uint64
	frames frames
	peers  []xskPeer
	fd     int

	fillPending uint32 // entries written to the fill ring after its producer index, not yet published
	nFill       int    // frames owned by the fill side (fill ring, kernel, receive ring)
	fillTarget  int    // how many frames the fill side is kept at
	inflight    int    // frames on the transmit side (transmit and completion rings)
	rxWake      bool   // Receive may need to wake the kernel: napi, or zero-copy
	napi        bool   // the socket has a NAPI instance: drive busy polling
	c           counters

	card     Card
	subnet   netip.Prefix
	status   Status
	reserve  int // the UDP socket that holds the port
	prog     *xdpObjects
	attached link.Link
	closed   bool
	final    Stats // the kernel's and the program's counts at Close
}

// xskPeer is a peer's header template.
type xskPeer struct {
	card Card
	tmpl [FrameOverhead]byte
	sum  uint32
}

// openXDP opens an XDP link on cfg's interface. Its errors wrap
// ErrNoPrivilege, ErrNoXSK, ErrRefused, ErrInterface or ErrConfig.
func openXDP(cfg Config) (l *xskLink, err error) {
	if cfg.Interface == "" {
		return nil, fmt.Errorf("%w: an XDP link needs an interface", ErrConfig)
	}
	ifc, ip, subnet, err := lookupInterface(cfg.Interface, cfg.Addr.Addr())
	if err != nil {
		return nil, err
	}
	if len(ifc.HardwareAddr) != 6 {
		return nil, fmt.Errorf("%w: %s has no Ethernet address; AF_XDP needs an Ethernet interface", ErrRefused, ifc.Name)
	}
	if cfg.Queue < 0 || cfg.Queue > 1<<16 {
		return nil, fmt.Errorf("%w: queue %d", ErrConfig, cfg.Queue)
	}
	frameSize, nframes, ringSize, err := xskSizes()
	if err != nil {
		return nil, err
	}
	mtu := min(ifc.MTU-ipv4Len-udpLen, int(frameSize)-unix.XDP_PACKET_HEADROOM-FrameOverhead, 0xffff)
	if mtu < HeaderLen+MessageLen {
		return nil, fmt.Errorf("%w: %s's MTU %d leaves no room for a Tachyon frame", ErrInterface, ifc.Name, ifc.MTU)
	}
	l = &xskLink{fd: -1, reserve: -1, cookie: cfg.Cookie, subnet: subnet, fillTarget: int(ringSize), mtu: mtu}
	defer func() {
		if err != nil {
			l.release()
			l = nil
		}
	}()

	// 1. Hold the port with a kernel UDP socket, which also picks one if
	// cfg leaves it 0: nothing else on the host can take it from us.
	l.reserve, err = udpSocket(netip.AddrPortFrom(ip, cfg.Addr.Port()), "")
	if err != nil {
		return l, fmt.Errorf("nic: reserving UDP port %d on %s: %w", cfg.Addr.Port(), ip, err)
	}
	port, err := boundPort(l.reserve)
	if err != nil {
		return l, err
	}

	// 2. The socket, its UMEM and its four rings, the fill ring stocked,
	// bound to the queue, zero-copy first.
	if err = l.openSocket(frameSize, nframes, ringSize); err != nil {
		return l, err
	}
	l.topUp()
	if err = l.bind(ifc, cfg.Queue); err != nil {
		return l, err
	}

	// 3. The XDP program, told our address and socket, attached last, so
	// that no frame of ours goes to the kernel for want of a socket.
	l.prog, err = newXDPObjects(cfg.Queue + 1)
	if err != nil {
		return l, classifyBPF(err)
	}
	if err = l.prog.setTarget(ip, port); err != nil {
		return l, err
	}
	if err = l.prog.setDropRate(dropRateVar.Get()); err != nil {
		return l, fmt.Errorf("%w: nic_drop_rate: %v", ErrConfig, err)
	}
	if err = l.prog.setSocket(cfg.Queue, l.fd); err != nil {
		return l, fmt.Errorf("nic: putting the socket in the XDP program's map: %w", err)
	}
	if err = l.attach(ifc); err != nil {
		return l, err
	}
	l.busyPoll()
	l.rxWake = l.napi || l.status.ZeroCopy

	l.card = Card{Mode: ModeXDP, IP: ip, Port: port, Queue: uint32(cfg.Queue), MTU: uint16(l.mtu)}
	copy(l.card.MAC[:], ifc.HardwareAddr)
	l.status.Mode = ModeXDP
	l.status.Interface = ifc.Name
	l.status.Driver = driverString(ifc.Name)
	l.c = newCounters()
	l.register()
	return l, nil
}

// xskSizes reads and checks the control variables that size a link.
func xskSizes() (frameSize, nframes, ringSize uint32, err error) {
	fs, n, r := frameSizeVar.Get(), framesVar.Get(), ringVar.Get()
	if fs != 2048 && fs != 4096 {
		return 0, 0, 0, fmt.Errorf("%w: nic_frame_size %d is not 2048 or 4096", ErrConfig, fs)
	}
	if r&(r-1) != 0 {
		return 0, 0, 0, fmt.Errorf("%w: nic_ring_size %d is not a power of two", ErrConfig, r)
	}
	if n < 2*r {
		return 0, 0, 0, fmt.Errorf("%w: nic_frames %d is less than twice nic_ring_size %d", ErrConfig, n, r)
	}
	return uint32(fs), uint32(n), uint32(r), nil
}

// openSocket makes the AF_XDP socket, registers the UMEM and maps the
// rings.
func (l *xskLink) openSocket(frameSize, nframes, ringSize uint32) error {
	fd, err := unix.Socket(unix.AF_XDP, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	switch {
	case errors.Is(err, unix.EAFNOSUPPORT):
		return fmt.Errorf("%w: socket(AF_XDP): %v", ErrNoXSK, err)
	case errors.Is(err, unix.EPERM), errors.Is(err, unix.EACCES):
		return fmt.Errorf("%w: socket(AF_XDP): %v", ErrNoPrivilege, err)
	case err != nil:
		return fmt.Errorf("nic: socket(AF_XDP): %w", err)
	}
	l.fd = fd

	size := int(frameSize * nframes)
	l.umem, err = unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_POPULATE)
	if err != nil {
		return fmt.Errorf("nic: allocating %d bytes of UMEM: %w", size, err)
	}
	l.shift = uint(log2(frameSize))
	l.frames = newFrames(int(nframes))
	reg := unix.XDPUmemReg{Addr: uint64(uintptr(unsafe.Pointer(&l.umem[0]))), Len: uint64(size), Size: frameSize}
	if err := setsockopt(fd, unix.XDP_UMEM_REG, unsafe.Pointer(&reg), unsafe.Sizeof(reg)); err != nil {
		return fmt.Errorf("nic: registering the UMEM: %w", err)
	}
	for _, o := range []int{unix.XDP_UMEM_FILL_RING, unix.XDP_UMEM_COMPLETION_RING, unix.XDP_RX_RING, unix.XDP_TX_RING} {
		if err := unix.SetsockoptInt(fd, unix.SOL_XDP, o, int(ringSize)); err != nil {
			return fmt.Errorf("nic: sizing ring %d of the AF_XDP socket: %w", o, err)
		}
	}
	var off unix.XDPMmapOffsets
	n := uint32(unsafe.Sizeof(off))
	if _, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_XDP, unix.XDP_MMAP_OFFSETS,
		uintptr(unsafe.Pointer(&off)), uintptr(unsafe.Pointer(&n)), 0); e != 0 {
		return fmt.Errorf("nic: reading the AF_XDP ring offsets: %w", e)
	}
	if n != uint32(unsafe.Sizeof(off)) {
		return fmt.Errorf("%w: the kernel's AF_XDP rings have no flags word (kernel before 5.4)", ErrNoXSK)
	}
	if l.rx, err = mapDescRing(fd, &off.Rx, unix.XDP_PGOFF_RX_RING, ringSize); err != nil {
		return fmt.Errorf("nic: receive ring: %w", err)
	}
	if l.tx, err = mapDescRing(fd, &off.Tx, unix.XDP_PGOFF_TX_RING, ringSize); err != nil {
		return fmt.Errorf("nic: transmit ring: %w", err)
	}
	if l.fill, err = mapAddrRing(fd, &off.Fr, unix.XDP_UMEM_PGOFF_FILL_RING, ringSize); err != nil {
		return fmt.Errorf("nic: fill ring: %w", err)
	}
	if l.comp, err = mapAddrRing(fd, &off.Cr, unix.XDP_UMEM_PGOFF_COMPLETION_RING, ringSize); err != nil {
		return fmt.Errorf("nic: completion ring: %w", err)
	}
	return nil
}

// attach attaches the XDP program to ifc: in the driver first, in the
// generic hook if the driver refuses (as nic_xdp_attach says), retrying
// EBUSY for nic_rebind_wait.
func (l *xskLink) attach(ifc *net.Interface) error {
	modes := []struct {
		name  string
		flags link.XDPAttachFlags
	}{{"driver", link.XDPDriverMode}, {"generic", link.XDPGenericMode}}
	switch attachVar.Get() {
	case "driver":
		modes = modes[:1]
	case "generic":
		modes = modes[1:]
	default:
		// A native program on a veth makes the pair hand every frame to
		// the peer's NAPI: one softirq hop more than the generic hook,
		// which runs inline as the frame crosses (docs/nic.md).
		if name, _ := driverName(ifc.Name); name == "veth" {
			modes[0], modes[1] = modes[1], modes[0]
		}
	}
	var errs []error
	for _, m := range modes {
		var a link.Link
		err := retryBusy(func() (err error) {
			a, err = link.AttachXDP(link.XDPOptions{Program: l.prog.prog, Interface: ifc.Index, Flags: m.flags})
			return err
		})
		if err == nil {
			l.attached, l.status.Attach = a, m.name
			return nil
		}
		if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) {
			return fmt.Errorf("%w: attaching the XDP program to %s: %v", ErrNoPrivilege, ifc.Name, err)
		}
		errs = append(errs, fmt.Errorf("%s mode: %w", m.name, err))
	}
	return fmt.Errorf("%w: attaching the XDP program to %s: %w", ErrRefused, ifc.Name, errors.Join(errs...))
}

// bind binds the socket to ifc's queue: zero-copy first, copy mode if
// the driver cannot (as nic_xdp_bind says), retrying EBUSY for
// nic_rebind_wait; then reads back which it got.
func (l *xskLink) bind(ifc *net.Interface, queue int) error {
	modes := []struct {
		name  string
		flags uint16
	}{{"zero-copy", unix.XDP_ZEROCOPY}, {"copy", unix.XDP_COPY}}
	switch bindVar.Get() {
	case "zerocopy":
		modes = modes[:1]
	case "copy":
		modes = modes[1:]
	}
	var errs []error
	for _, m := range modes {
		sa := &unix.SockaddrXDP{Flags: m.flags | unix.XDP_USE_NEED_WAKEUP, Ifindex: uint32(ifc.Index), QueueID: uint32(queue)}
		err := retryBusy(func() error { return unix.Bind(l.fd, sa) })
		if err == nil {
			var opt uint32
			n := uint32(4)
			if _, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(l.fd), unix.SOL_XDP, unix.XDP_OPTIONS,
				uintptr(unsafe.Pointer(&opt)), uintptr(unsafe.Pointer(&n)), 0); e == 0 {
				l.status.ZeroCopy = opt&unix.XDP_OPTIONS_ZEROCOPY != 0
			}
			return nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", m.name, err))
	}
	return fmt.Errorf("%w: binding an AF_XDP socket to %s queue %d: %w", ErrRefused, ifc.Name, queue, errors.Join(errs...))
}

// retryBusy calls f until it returns anything but EBUSY, for at most
// nic_rebind_wait: a queue or interface is busy for a moment after the
// socket or program that held it closed.
func retryBusy(f func() error) error {
	deadline := time.Now().Add(rebindVar.Get())
	for wait := time.Millisecond; ; wait = min(2*wait, 50*time.Millisecond) {
		err := f()
		if !errors.Is(err, unix.EBUSY) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(wait)
	}
}

// busyPoll asks for busy polling where nic_busy_poll says so, and notes
// whether the socket has a NAPI instance for the link to drive.
func (l *xskLink) busyPoll() {
	if !busyPollVar.Get() {
		return
	}
	ok := unix.SetsockoptInt(l.fd, unix.SOL_SOCKET, unix.SO_PREFER_BUSY_POLL, 1) == nil &&
		unix.SetsockoptInt(l.fd, unix.SOL_SOCKET, unix.SO_BUSY_POLL, int(busyUsecsVar.Get())) == nil &&
		unix.SetsockoptInt(l.fd, unix.SOL_SOCKET, unix.SO_BUSY_POLL_BUDGET, int(busyBudgetVar.Get())) == nil
	l.status.BusyPoll = ok
	if id, err := unix.GetsockoptInt(l.fd, unix.SOL_SOCKET, unix.SO_INCOMING_NAPI_ID); ok && err == nil && id != 0 {
		l.napi = true
		l.status.NAPIPolled = true
	}
}

func (l *xskLink) Card() Card     { return l.card }
func (l *xskLink) MTU() int       { return l.mtu }
func (l *xskLink) Status() Status { return l.status }

func (l *xskLink) AddPeer(c Card) (Peer, error) {
	if !c.IP.Is4() {
		return 0, fmt.Errorf("%w: %v is not an IPv4 address", ErrPeer, c.IP)
	}
	if c.MAC == ([6]byte{}) {
		return 0, fmt.Errorf("%w: card %v has no Ethernet address, which an XDP link needs (open the peer's link on an interface)", ErrPeer, c)
	}
	if c.IP == l.card.IP {
		return 0, fmt.Errorf("%w: %v is this link's own address; an XDP link sends on the wire and cannot reach it (use a UDP link)", ErrPeer, c.IP)
	}
	if !l.subnet.Contains(c.IP) {
		return 0, fmt.Errorf("%w: %v is not on %s's subnet %v; an XDP link sends without routing", ErrPeer, c.IP, l.status.Interface, l.subnet)
	}
	for i, p := range l.peers {
		if p.card.AddrPort() == c.AddrPort() {
			l.peers[i] = newXSKPeer(l.card, c)
			return Peer(i), nil
		}
	}
	if len(l.peers) > 0xffff {
		return 0, fmt.Errorf("%w: more than 65536 peers", ErrPeer)
	}
	l.peers = append(l.peers, newXSKPeer(l.card, c))
	return Peer(len(l.peers) - 1), nil
}

func newXSKPeer(self, c Card) xskPeer {
	p := xskPeer{card: c, tmpl: headerTemplate(self, c)}
	p.sum = templateSum(&p.tmpl)
	return p
}

// Receive reads the receive ring. A frame that fails the checks goes
// straight back to the fill ring.
func (l *xskLink) Receive(rx []RxDesc) int {
	if l.closed {
		return 0
	}
	avail := l.rx.consReady()
	if avail == 0 {
		// Idle: publish what the last frames freed, then wake if need be.
		l.rx.consFlush()
		l.comp.consFlush()
		if l.rxWake {
			l.wakeRx()
		}
		return 0
	}
	n, bytes := 0, 0
	var i uint32
	for ; i < avail && n < len(rx); i++ {
		d := &l.rx.descs[(l.rx.cons+i)&l.rx.mask]
		f := Frame(d.Addr >> l.shift)
		end := d.Addr + uint64(d.Len)
		if !l.frames.valid(f) || l.frames.owner[f] != ownFill || end > uint64(f+1)<<l.shift {
			// Not a frame we posted, or past its end: the kernel never
			// does this; count it and leave the frame alone.
			l.c.length.Inc()
			continue
		}
		l.nFill--
		// The frame's second cache line, which the Tachyon header reaches
		// into, comes while the checks wait for the first.
		if d.Len > 64 {
			asm.Prefetch(unsafe.Pointer(&l.umem[(d.Addr+64)&^63]))
		}
		payload, ip, port, err := parseUDP(l.umem[d.Addr:end])
		if err == nil {
			err = check(payload, l.cookie)
		}
		if err != nil {
			l.c.drop(err)
			l.fillPut(f)
			continue
		}
		l.frames.owner[f] = ownRx
		rx[n] = RxDesc{Frame: f, Data: payload, From: netip.AddrPortFrom(netip.AddrFrom4(ip), port)}
		n++
		bytes += len(payload)
	}
	l.rx.consReleaseLazy(i)
	l.fillFlush()
	if n > 0 {
		l.c.rxFrames.Add(uint64(n))
		l.c.rxBytes.Add(uint64(bytes))
	}
	return n
}

// wakeRx makes the system call that moves the receive side on, when the
// socket has a NAPI instance to busy-poll or a zero-copy driver asked
// for one (it ran out of fill frames). Receive calls it only where one
// of those can be (rxWake): in copy mode the kernel never asks, and the
// fill ring's flags share a cache line with its consumer index, which
// the kernel writes on every frame, so reading them on each empty poll
// would cost a cache miss just as a frame comes.
func (l *xskLink) wakeRx() {
	if !l.napi && !l.fill.needWakeup() {
		return
	}
	unix.RawSyscall6(unix.SYS_RECVFROM, uintptr(l.fd), 0, 0, unix.MSG_DONTWAIT, 0, 0)
	l.c.wakeups.Inc()
}

// fillPut gives f to the fill side: onto the fill ring (published by
// fillFlush) if it has room and the fill side is under its target, else
// onto the free list.
func (l *xskLink) fillPut(f Frame) {
	if l.nFill >= l.fillTarget || l.fill.prodFree(l.fillPending+1) <= l.fillPending {
		l.frames.push(f)
		return
	}
	l.fill.addrs[(l.fill.prod+l.fillPending)&l.fill.mask] = uint64(f) << l.shift
	l.fillPending++
	l.frames.owner[f] = ownFill
	l.nFill++
}

// fillFlush publishes the entries fillPut wrote.
func (l *xskLink) fillFlush() {
	if l.fillPending > 0 {
		l.fill.prodSubmit(l.fillPending)
		l.fillPending = 0
	}
}

// topUp moves free frames to the fill ring until the fill side is at its
// target or the ring is full, and returns how many it moved.
func (l *xskLink) topUp() int {
	want := min(l.fillTarget-l.nFill, l.frames.nfree)
	if want <= 0 {
		return 0
	}
	n := min(want, int(l.fill.prodFree(uint32(want))))
	for range n {
		l.frames.nfree--
		l.fillPut(l.frames.free[l.frames.nfree])
	}
	l.fillFlush()
	return n
}

func (l *xskLink) Release(fs []Frame) error {
	if l.closed {
		return ErrClosed
	}
	defer l.fillFlush()
	for _, f := range fs {
		if !l.frames.release(f, l.fillPut) {
			return fmt.Errorf("%w: releasing frame %d (%s)", ErrNotOwned, f, ownerName(&l.frames, f))
		}
	}
	return nil
}

func (l *xskLink) Alloc(fs []Frame) int {
	// Take completions back on every call, not only when the free list
	// runs short: the kernel stops sending once the completion ring is
	// full, long before the free list empties.
	if l.closed {
		return 0
	}
	if l.inflight > 0 {
		l.reap()
	}
	return l.frames.pop(fs, ownUser)
}

func (l *xskLink) Bytes(f Frame) []byte {
	if !l.frames.valid(f) || l.closed {
		return nil
	}
	a := uint64(f)<<l.shift + FrameOverhead
	return l.umem[a : a+uint64(l.mtu) : a+uint64(l.mtu)]
}

func (l *xskLink) Send(tx []TxDesc) (int, error) {
	if l.closed {
		return 0, ErrClosed
	}
	room := int(l.tx.prodFree(uint32(len(tx))))
	var err error
	i, bytes := 0, 0
	for ; i < len(tx); i++ {
		d := &tx[i]
		if i == room {
			l.c.txFull.Inc()
			break
		}
		if err = l.frames.sendable(d.Frame); err != nil {
			err = fmt.Errorf("%w: sending frame %d (%s)", err, d.Frame, ownerName(&l.frames, d.Frame))
			break
		}
		if int(d.Peer) >= len(l.peers) {
			err = fmt.Errorf("%w: peer %d", ErrPeer, d.Peer)
			break
		}
		if int(d.Len) > l.mtu {
			err = fmt.Errorf("%w: %d bytes, MTU %d", ErrTooLong, d.Len, l.mtu)
			break
		}
		p := &l.peers[d.Peer]
		base := uint64(d.Frame) << l.shift
		putHeaders(l.umem[base:base+FrameOverhead], &p.tmpl, p.sum, int(d.Len))
		slot := &l.tx.descs[(l.tx.prod+uint32(i))&l.tx.mask]
		slot.Addr, slot.Len, slot.Options = base, FrameOverhead+uint32(d.Len), 0
		if d.Keep {
			l.frames.owner[d.Frame] = ownTxKeep
		} else {
			l.frames.owner[d.Frame] = ownTx
		}
		bytes += int(d.Len)
	}
	if i > 0 {
		l.tx.prodSubmit(uint32(i))
		l.inflight += i
		l.c.txFrames.Add(uint64(i))
		l.c.txBytes.Add(uint64(bytes))
		l.kick()
	}
	return i, err
}

// kick wakes the kernel's transmit side if it asked to be woken.
func (l *xskLink) kick() {
	if !l.tx.needWakeup() {
		return
	}
	unix.RawSyscall6(unix.SYS_SENDTO, uintptr(l.fd), 0, 0, unix.MSG_DONTWAIT, 0, 0)
	l.c.kicks.Inc()
}

// reap takes completed sends off the completion ring and returns how
// many.
func (l *xskLink) reap() int {
	n := l.comp.consReady()
	for i := range n {
		f := Frame(l.comp.addrs[(l.comp.cons+i)&l.comp.mask] >> l.shift)
		if !l.frames.completed(f) {
			l.c.length.Inc() // a completion for a frame not in flight: the kernel never does this
		}
	}
	if n > 0 {
		l.comp.consReleaseLazy(n)
		l.inflight -= int(n)
	}
	return int(n)
}

func (l *xskLink) Poll() int {
	if l.closed {
		return 0
	}
	n := l.reap() + l.topUp()
	l.rx.consFlush()
	l.comp.consFlush()
	// A kick sends at most a budget of frames (32 in copy mode): kick
	// again while the kernel has left some on the ring.
	if l.inflight > 0 && l.tx.unconsumed() > 0 {
		l.kick()
	}
	return n
}

func (l *xskLink) Stats() Stats {
	s := l.c.stats()
	if l.closed {
		s.addXDP(l.final)
	} else {
		s.addXDP(l.xdpStats())
	}
	return s
}

// kernelStats reads the socket's XDP_STATISTICS.
func (l *xskLink) kernelStats() XSKStats {
	var st unix.XDPStatistics
	n := uint32(unsafe.Sizeof(st))
	if _, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(l.fd), unix.SOL_XDP, unix.XDP_STATISTICS,
		uintptr(unsafe.Pointer(&st)), uintptr(unsafe.Pointer(&n)), 0); e != 0 {
		return XSKStats{}
	}
	return XSKStats{RxDropped: st.Rx_dropped, RxInvalid: st.Rx_invalid_descs, TxInvalid: st.Tx_invalid_descs,
		RxRingFull: st.Rx_ring_full, FillRingEmpty: st.Rx_fill_ring_empty_descs, TxRingEmptyDesc: st.Tx_ring_empty_descs}
}

func (l *xskLink) programStats() ProgramStats {
	c, err := l.prog.counts()
	if err != nil {
		return ProgramStats{}
	}
	return ProgramStats{Redirected: c.Redirected, Passed: c.Passed, Dropped: c.Dropped}
}

// SetDropRate changes the probability of dropping a frame of ours in the
// XDP program, for loss tests.
func (l *xskLink) SetDropRate(p float64) error { return l.prog.setDropRate(p) }

func (l *xskLink) Close() error {
	if l.closed {
		return ErrClosed
	}
	l.closed = true
	l.final = l.xdpStats()
	l.retire()
	l.c.close()
	return l.release()
}

// release undoes what openXDP did, in reverse: the program comes off the
// interface first, so that no frame is redirected to a closing socket.
func (l *xskLink) release() error {
	var errs []error
	if l.attached != nil {
		errs = append(errs, l.attached.Close())
	}
	if l.prog != nil {
		errs = append(errs, l.prog.Close())
	}
	if l.fd >= 0 {
		errs = append(errs, unix.Close(l.fd))
		l.fd = -1
	}
	for _, r := range []*xskRing{&l.rx.xskRing, &l.tx.xskRing, &l.fill.xskRing, &l.comp.xskRing} {
		r.unmap()
	}
	if l.umem != nil {
		errs = append(errs, unix.Munmap(l.umem))
		l.umem = nil
	}
	if l.reserve >= 0 {
		errs = append(errs, unix.Close(l.reserve))
		l.reserve = -1
	}
	return errors.Join(errs...)
}

// audit checks the frame ownership record against the rings: every
// frame has one owner, the fill ring holds only frames of the fill side,
// the transmit ring only frames in flight, and the counts agree. Tests
// call it between operations.
func (l *xskLink) audit() error {
	n, err := l.frames.audit()
	if err != nil {
		return err
	}
	if n[ownFill] != l.nFill {
		return fmt.Errorf("%d frames marked fill, the link counts %d", n[ownFill], l.nFill)
	}
	if tx := n[ownTx] + n[ownTxKeep] + n[ownTxFree]; tx != l.inflight {
		return fmt.Errorf("%d frames marked in flight, the link counts %d", tx, l.inflight)
	}
	for p, c := l.fill.prod, asmLoad(l.fill.consumer); c != p; c++ {
		f := Frame(l.fill.addrs[c&l.fill.mask] >> l.shift)
		if o := ownerName(&l.frames, f); o != "fill" {
			return fmt.Errorf("fill ring holds frame %d owned by %s", f, o)
		}
	}
	for p, c := l.tx.prod, asmLoad(l.tx.consumer); c != p; c++ {
		f := Frame(l.tx.descs[c&l.tx.mask].Addr >> l.shift)
		if o := l.frames.owner[f]; o != ownTx && o != ownTxKeep && o != ownTxFree {
			return fmt.Errorf("transmit ring holds frame %d owned by %s", f, ownerName(&l.frames, f))
		}
	}
	return nil
}

func log2(v uint32) int {
	n := 0
	for v > 1 {
		v >>= 1
		n++
	}
	return n
}
