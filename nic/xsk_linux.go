package nic

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/tachyon-hpc/tachyon/asm"
)

// An XDP link, the way a frame goes:
//
// Receive: the NIC (or veth) receives a frame, on one of its receive
// queues, into memory the kernel took from that queue's fill ring; the
// XDP program matches it as Tachyon's (IPv4 UDP to a link's address and
// port, with the link's cookie) and redirects it to the link's socket on
// that queue; the kernel (copy mode) copies it into a UMEM frame taken
// from the socket's fill ring, or (zero-copy) the driver received it
// there, and puts the frame on the socket's receive ring. Receive reads
// the rings of the link's sockets, checks the headers, hands the frames
// to the caller; Release puts each back on the fill ring of the socket
// that received it. A frame that came on a queue where the link has no
// socket goes to the kernel, and so to the link's UDP socket, which
// holds its port: Receive reads that socket when the program says it
// passed a frame there (the pending count) and now and then in any case.
//
// Send: Alloc takes a frame off the free list; the caller writes its
// Tachyon frame at Bytes; Send writes the Ethernet, IPv4 and UDP headers
// from the peer's template in front, puts the frame on the transmit ring
// of the link's first socket and, if the kernel asks
// (XDP_RING_NEED_WAKEUP, always in copy mode), kicks it with a
// non-blocking sendto. When the frame has gone, the kernel puts it on the
// completion ring; Alloc or Poll takes it back to the free list, or to
// the caller if it was sent with Keep.
//
// The link's sockets, one for each receive queue it binds, share one
// UMEM (XDP_SHARED_UMEM): the first registers it, the others bind with
// its descriptor, each with fill and completion rings of its own, as the
// kernel asks of sockets on different queues.

// xskLink is a Link over AF_XDP sockets.
type xskLink struct {
	// The hot fields, in the order Receive and Send use them.
	first  xskSock    // the socket that registered the UMEM, and sends
	socks  []*xskSock // first, then the sockets sharing its UMEM
	umem   []byte
	shift  uint // log2 of the frame buffer's size
	mtu    int
	sg     bool    // the sockets are bound with XDP_USE_SG: a frame over a chunk spans several
	chunk  uint32  // the UMEM's chunk: the frame buffer, or a page of it where sg
	txLeft []uint8 // by frame, where sg: the chunks of its send not yet completed, less one
	cookie uint64
	frames frames
	home   []uint8 // by frame: the socket whose fill side a received frame goes back to (noHome: the free list)
	peers  []xskPeer
	next   int // the socket Receive reads first, turn about

	inflight    int     // frames on the transmit side (transmit and completion rings)
	pending     *uint64 // frames the program passed to the UDP socket (its count for the link's port)
	pendingSeen uint64  // pending when the UDP socket was last read empty
	polls       uint32  // Poll calls, for the sweep of the UDP socket
	fbName      unix.RawSockaddrInet4
	c           counters
	napiPolled  atomic.Bool

	card    Card
	subnet  netip.Prefix
	status  Status
	reserve int // the UDP socket that holds the port, takes what the program passes, and sends to KernelPeers
	routes  routeTables
	prog    *xdpShared
	slot    uint32 // the link's in the program (0: none yet)
	port    uint16
	ethFD   int    // for ethtool requests in the interface's namespace, or -1
	steerAt uint32 // the flow rule's location, when Status.Steered
	queues  []int  // the receive queues bound, socks[i] on queues[i]
	closed  bool
	final   Stats // the kernel's and the program's counts at Close
}

// xskSock is one AF_XDP socket of a link, bound to one receive queue.
type xskSock struct {
	rx   descRing
	fill addrRing
	tx   descRing // socks[0]'s only
	comp addrRing
	fd   int

	fillPending uint32 // entries written to the fill ring after its producer index, not yet published
	nFill       int    // frames owned by the fill side (fill ring, kernel, receive ring)
	fillTarget  int    // how many frames the fill side is kept at
	rxWake      bool   // Receive may need to wake the kernel: napi, or zero-copy
	napi        bool   // the socket has a NAPI instance: drive busy polling
	napiRead    bool   // the NAPI id was read after a frame came
	zeroCopy    bool
	sg          bool // bound with XDP_USE_SG (the first socket), or sharing a UMEM so bound
	once        bool // bind without waiting out EBUSY
}

// noHome marks a frame that goes back to the free list on Release: one
// read from the UDP socket.
const noHome = 0xff

// maxSocks is the most sockets (receive queues) a link binds.
const maxSocks = noHome

// xskPeer is a peer's header template.
type xskPeer struct {
	card Card
	tmpl [FrameOverhead]byte
	sum  uint32

	kernel bool                  // off the subnet with no next hop to address: sent through the UDP socket
	sa     unix.RawSockaddrInet4 // the peer's address, for kernel
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
	nq := rxQueues(ifc.Name)
	want, err := cfg.queues(nq)
	if err != nil {
		return nil, err
	}
	minSize, nframes, ringSize, err := xskSizes()
	if err != nil {
		return nil, err
	}
	// A buffer that holds a frame of the interface's MTU, in chunks of a
	// page at most (the kernel's limit): one where it fits, several
	// gathered by XDP_USE_SG where not.
	frameSize := bufferSize(minSize, ifc.MTU)
	mtu := linkMTU(ifc.MTU, frameSize)
	if mtu < HeaderLen+MessageLen {
		return nil, fmt.Errorf("%w: %s's MTU %d leaves no room for a Tachyon frame", ErrInterface, ifc.Name, ifc.MTU)
	}
	l = &xskLink{reserve: -1, ethFD: -1, cookie: cfg.Cookie, subnet: subnet, mtu: mtu, chunk: min(frameSize, uint32(unix.Getpagesize()))}
	l.sg = l.chunk < frameSize
	defer func() {
		if err != nil {
			l.release()
			l = nil
		}
	}()

	if l.routes, err = openRouteTables(); err != nil {
		return l, err
	}

	// 1. Hold the port with a kernel UDP socket, which also picks one if
	// cfg leaves it 0: nothing else on the host can take it from us. It
	// receives what the program passes to the kernel.
	l.reserve, err = udpSocket(netip.AddrPortFrom(ip, cfg.Addr.Port()), "")
	if err != nil {
		return l, fmt.Errorf("nic: reserving UDP port %d on %s: %w", cfg.Addr.Port(), ip, err)
	}
	port, err := boundPort(l.reserve)
	if err != nil {
		return l, err
	}
	size := int(udpBufVar.Get())
	if unix.SetsockoptInt(l.reserve, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, size) != nil {
		unix.SetsockoptInt(l.reserve, unix.SOL_SOCKET, unix.SO_RCVBUF, size)
	}

	// 2. The interface's program, this process's, another's or new, and
	// a slot of its for the link.
	if l.prog, err = acquireXDP(ifc, nq); err != nil {
		return l, err
	}
	l.status.Attach = l.prog.attach
	if l.slot, err = l.prog.obj.addPort(ip, port, cfg.Cookie); err != nil {
		return l, err
	}
	l.port = port
	if err = l.prog.obj.setDropRate(l.slot, dropRateVar.Get()); err != nil {
		return l, fmt.Errorf("%w: nic_drop_rate: %v", ErrConfig, err)
	}
	l.pending = l.prog.obj.pendingOf(l.slot)
	l.pendingSeen = atomic.LoadUint64(l.pending)

	// 3. The UMEM, and a socket on each queue of the link's share that
	// no other link holds, the fill rings stocked.
	if err = l.openSockets(ifc, want, frameSize, nframes, ringSize); err != nil {
		return l, err
	}
	if l.sg && !l.first.sg {
		// The kernel or the driver refused multi-buffer: a frame is a chunk.
		l.sg = false
		l.mtu = min(l.mtu, int(l.chunk)-unix.XDP_PACKET_HEADROOM-FrameOverhead)
		slog.Info("nic: AF_XDP multi-buffer refused; frames are kept to one UMEM chunk", "interface", ifc.Name, "mtu", l.mtu, "why", l.status.FrameLimit)
	}

	// 4. The sockets in the program, then the port, so that no frame of
	// ours goes to the kernel for want of one on a queue we bind.
	for i, sk := range l.socks {
		if err = l.prog.obj.setSocket(l.queues[i], sk.fd, l.slot); err != nil {
			return l, fmt.Errorf("nic: putting a socket in the XDP program's map: %w", err)
		}
	}
	if err = l.prog.obj.activate(port, l.slot); err != nil {
		return l, err
	}
	if len(l.queues) < nq {
		l.steer(ifc.Name, netip.AddrPortFrom(ip, port))
	}

	l.status.MultiBuffer = l.sg
	l.card = Card{Mode: ModeXDP, IP: ip, Port: port, Queue: uint32(l.queues[0]), MTU: uint16(l.mtu)}
	copy(l.card.MAC[:], ifc.HardwareAddr)
	l.status.Mode = ModeXDP
	l.status.Interface = ifc.Name
	l.status.Chosen = cfg.Chosen
	l.status.Driver = driverString(ifc.Name)
	l.status.ZeroCopy = l.first.zeroCopy
	l.status.Queues = slices.Clone(l.queues)
	l.status.InterfaceQueues = nq
	for _, sk := range l.socks {
		l.status.RxCapacity += sk.fillTarget
	}
	if l.sg {
		// A frame of the MTU takes this many chunks of the fill side,
		// each after the kernel's headroom.
		l.status.RxCapacity /= (FrameOverhead + l.mtu + int(l.chunk) - unix.XDP_PACKET_HEADROOM - 1) / (int(l.chunk) - unix.XDP_PACKET_HEADROOM)
	}
	if l.mtu < ifc.MTU-ipv4Len-udpLen && l.status.FrameLimit == "" {
		l.status.FrameLimit = "nic_max_mtu " + strconv.Itoa(int(maxMTUVar.Get()))
	}
	l.fbName.Family = unix.AF_INET
	l.c = newCounters()
	l.register()
	return l, nil
}

// steer asks the NIC for a rule that sends the link's datagrams to its
// first queue: a link on some of the queues would otherwise receive most
// of its frames through its UDP socket, as RSS spreads them over all.
// Where the driver refuses, it says so and goes on.
func (l *xskLink) steer(ifc string, ap netip.AddrPort) {
	fd, err := ethtoolSocket()
	if err == nil {
		l.ethFD = fd
		l.steerAt, err = steer(fd, ifc, ap, l.queues[0])
	}
	if err != nil {
		slog.Info("nic: no flow steering for the link's share of the receive queues; frames that arrive on other queues come through its UDP socket, slower",
			"interface", ifc, "queues", l.queues, "why", err.Error())
		return
	}
	l.status.Steered = true
}

// queues returns the receive queues a link of cfg binds, of nq: Queues if
// set, else its share of all.
func (cfg Config) queues(nq int) ([]int, error) {
	if len(cfg.Queues) > 0 {
		for _, q := range cfg.Queues {
			if q < 0 || q >= nq {
				return nil, fmt.Errorf("%w: queue %d of an interface with %d receive queues", ErrConfig, q, nq)
			}
		}
		return cfg.Queues, nil
	}
	i, n := cfg.Share.Index, max(cfg.Share.Count, 1)
	if i < 0 || i >= n {
		return nil, fmt.Errorf("%w: share %d of %d", ErrConfig, i, n)
	}
	if i >= nq {
		return nil, fmt.Errorf("%w: this link is the %d-th of %d on the host, and the interface has only %d receive queues: give it more (ethtool -L) or fewer ranks", ErrRefused, i+1, n, nq)
	}
	var qs []int
	for q := i; q < nq; q += n {
		qs = append(qs, q)
	}
	return qs, nil
}

// rxQueues returns the number of receive queues of the interface named
// ifc: its channels (ETHTOOL_GCHANNELS, receive and combined), 1 where
// the driver does not say.
func rxQueues(ifc string) int {
	fd, err := ethtoolSocket()
	if err != nil {
		return 1
	}
	defer unix.Close(fd)
	var ch struct {
		cmd                                         uint32
		maxRx, maxTx, maxOther, maxCombined         uint32
		rxCount, txCount, otherCount, combinedCount uint32
	}
	ch.cmd = unix.ETHTOOL_GCHANNELS
	if ethtoolIoctl(fd, ifc, unsafe.Pointer(&ch)) != nil {
		return 1
	}
	return max(int(ch.rxCount+ch.combinedCount), 1)
}

// bufferSize returns the size of a link's frame buffers on an interface
// of MTU ifcMTU: nic_frame_size (min), or the power of two that holds a
// frame of the link's MTU (linkMTU) after the kernel's receive headroom,
// 64 KiB at most.
func bufferSize(min uint32, ifcMTU int) uint32 {
	want := unix.XDP_PACKET_HEADROOM + ethLen + capMTU(ifcMTU)
	b := min
	for int(b) < want && b < 1<<16 {
		b <<= 1
	}
	return b
}

// capMTU is the IP MTU a link uses on an interface of MTU ifcMTU: that,
// at most nic_max_mtu.
func capMTU(ifcMTU int) int { return min(ifcMTU, int(maxMTUVar.Get())) }

// linkMTU is the MTU (largest Tachyon frame) of a link with frame
// buffers of frameSize bytes on an interface of MTU ifcMTU: the IP MTU
// (capMTU) less the IPv4 and UDP headers, at most what a buffer holds
// after the receive headroom and the headers, and what a frame's u16
// length field says.
func linkMTU(ifcMTU int, frameSize uint32) int {
	return min(capMTU(ifcMTU)-ipv4Len-udpLen, int(frameSize)-unix.XDP_PACKET_HEADROOM-FrameOverhead, 0xffff)
}

// xskSizes reads and checks the control variables that size a link:
// its frame buffers' least size, their number, its rings' size.
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

// openSockets allocates the UMEM and opens a socket on each of the
// queues want that no other link holds, skipping those at once: the
// first registers the UMEM, the others share it. At least one must bind.
func (l *xskLink) openSockets(ifc *net.Interface, want []int, frameSize, nframes, ringSize uint32) error {
	size := int(frameSize) * int(nframes)
	var err error
	l.umem, err = unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_POPULATE)
	if err != nil {
		return fmt.Errorf("nic: allocating %d bytes of UMEM: %w", size, err)
	}
	l.shift = uint(log2(frameSize))
	l.frames = newFrames(int(nframes))
	l.home = make([]uint8, nframes)
	if l.sg {
		l.txLeft = make([]uint8, nframes)
	}
	// The fill sides together take half the frames at most, each at most
	// a ring: the rest is for sending.
	target := min(int(ringSize), int(nframes)/2/min(len(want), maxSocks))
	if target < 16 {
		return fmt.Errorf("%w: nic_frames %d leaves fewer than 16 receive frames for each of %d queues", ErrConfig, nframes, len(want))
	}
	var held []string
	for _, q := range want {
		if len(l.socks) == maxSocks {
			break
		}
		s := &l.first
		if len(l.socks) > 0 {
			s = new(xskSock)
		}
		// Where the program says a link holds the queue, that link's UDP
		// socket tells whether it lives: a live one holds the queue (one
		// bind, no waiting); a killed process's entries stay in the maps
		// while others hold the program: free them, and wait out the
		// kernel's teardown of its socket.
		owner, ownerAP := l.prog.obj.queueOwner(q)
		if owner != 0 && !portHeld(ownerAP) {
			l.prog.obj.removePort(ownerAP.Port(), owner)
			l.prog.obj.clearSocket(q, owner)
			owner = 0
		}
		*s = xskSock{fd: -1, fillTarget: target, once: owner != 0}
		err := l.openSocket(s, ifc, q, frameSize, ringSize)
		if err == nil {
			l.socks = append(l.socks, s)
			l.queues = append(l.queues, q)
			continue
		}
		s.close()
		if errors.Is(err, unix.EBUSY) {
			if owner != 0 {
				held = append(held, fmt.Sprintf("%d (port %d)", q, ownerAP.Port()))
			} else {
				held = append(held, fmt.Sprintf("%d (busy)", q))
			}
			continue
		}
		return err
	}
	if len(l.socks) == 0 {
		return fmt.Errorf("%w: every receive queue of %s this link may take is held by another AF_XDP socket: %s", ErrRefused, ifc.Name, strings.Join(held, ", "))
	}
	if len(held) > 0 {
		slog.Info("nic: some receive queues are held by other links; frames for this link that arrive there go through its UDP socket",
			"interface", ifc.Name, "bound", l.queues, "held", held)
	}
	for i, sk := range l.socks {
		l.topUpSock(sk, i)
	}
	return nil
}

// portHeld reports whether a UDP socket holds ap: whether the link that
// registered ap with the program lives.
func portHeld(ap netip.AddrPort) bool {
	fd, err := udpSocket(ap, "")
	if err != nil {
		return errors.Is(err, unix.EADDRINUSE)
	}
	unix.Close(fd)
	return false
}

// openSocket makes an AF_XDP socket on queue q: the UMEM's first, which
// registers it and has the transmit ring, or one sharing it, which only
// receives; maps its rings and binds it.
func (l *xskLink) openSocket(s *xskSock, ifc *net.Interface, q int, frameSize, ringSize uint32) error {
	fd, err := unix.Socket(unix.AF_XDP, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	switch {
	case errors.Is(err, unix.EAFNOSUPPORT):
		return fmt.Errorf("%w: socket(AF_XDP): %v", ErrNoXSK, err)
	case errors.Is(err, unix.EPERM), errors.Is(err, unix.EACCES):
		return fmt.Errorf("%w: socket(AF_XDP): %v", ErrNoPrivilege, err)
	case err != nil:
		return fmt.Errorf("nic: socket(AF_XDP): %w", err)
	}
	s.fd = fd
	first := len(l.socks) == 0
	if first {
		reg := unix.XDPUmemReg{Addr: uint64(uintptr(unsafe.Pointer(&l.umem[0]))), Len: uint64(len(l.umem)), Size: l.chunk}
		if err := setsockopt(fd, unix.XDP_UMEM_REG, unsafe.Pointer(&reg), unsafe.Sizeof(reg)); err != nil {
			return umemError(len(l.umem), err)
		}
	}
	opts := []int{unix.XDP_UMEM_FILL_RING, unix.XDP_UMEM_COMPLETION_RING, unix.XDP_RX_RING}
	if first {
		opts = append(opts, unix.XDP_TX_RING)
	}
	for _, o := range opts {
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
	if s.rx, err = mapDescRing(fd, &off.Rx, unix.XDP_PGOFF_RX_RING, ringSize); err != nil {
		return fmt.Errorf("nic: receive ring: %w", err)
	}
	if first {
		if s.tx, err = mapDescRing(fd, &off.Tx, unix.XDP_PGOFF_TX_RING, ringSize); err != nil {
			return fmt.Errorf("nic: transmit ring: %w", err)
		}
	}
	if s.fill, err = mapAddrRing(fd, &off.Fr, unix.XDP_UMEM_PGOFF_FILL_RING, ringSize); err != nil {
		return fmt.Errorf("nic: fill ring: %w", err)
	}
	if s.comp, err = mapAddrRing(fd, &off.Cr, unix.XDP_UMEM_PGOFF_COMPLETION_RING, ringSize); err != nil {
		return fmt.Errorf("nic: completion ring: %w", err)
	}
	shared := -1
	if !first {
		shared = l.first.fd
	}
	if err := l.bind(s, ifc, q, shared); err != nil {
		return err
	}
	l.busyPoll(s)
	return nil
}

// umemError is the error of registering a UMEM of size bytes. The kernel
// pins a UMEM, charging it to RLIMIT_MEMLOCK unless the thread has
// CAP_IPC_LOCK: over the limit (ENOBUFS, ENOMEM, EPERM) AF_XDP cannot be
// had for want of a privilege, so ModeAuto takes UDP.
func umemError(size int, err error) error {
	if errors.Is(err, unix.ENOBUFS) || errors.Is(err, unix.ENOMEM) || errors.Is(err, unix.EPERM) {
		return fmt.Errorf("%w: registering the UMEM of %d bytes: %v: the kernel pins it, which needs CAP_IPC_LOCK or a memlock limit (ulimit -l) above its size; or make it smaller (nic_frames, nic_frame_size)", ErrNoPrivilege, size, err)
	}
	return fmt.Errorf("nic: registering the UMEM: %w", err)
}

// bind binds s to ifc's queue q, sharing the UMEM of the socket shared
// if it is not -1: zero-copy first, copy mode if the driver cannot (as
// nic_xdp_bind says), each multi-buffer (XDP_USE_SG) first where the
// link's frames span chunks and single-buffer if the kernel (before 6.6)
// or the driver refuses that; then reads back which it got. EBUSY right
// after another socket on the queue closed is retried for
// nic_rebind_wait.
func (l *xskLink) bind(s *xskSock, ifc *net.Interface, q, shared int) error {
	type mode struct {
		name  string
		flags uint16
	}
	modes := []mode{{"zero-copy", unix.XDP_ZEROCOPY}, {"copy", unix.XDP_COPY}}
	switch bindVar.Get() {
	case "zerocopy":
		modes = modes[:1]
	case "copy":
		modes = modes[1:]
	}
	if l.sg {
		var sg []mode
		for _, m := range modes {
			sg = append(sg, mode{m.name + " multi-buffer", m.flags | unix.XDP_USE_SG}, m)
		}
		modes = sg
	}
	if shared >= 0 {
		modes = modes[len(modes)-1:] // one try: the flags are the first socket's
	}
	var errs []error
	for _, m := range modes {
		sa := &unix.SockaddrXDP{Flags: m.flags | unix.XDP_USE_NEED_WAKEUP, Ifindex: uint32(ifc.Index), QueueID: uint32(q)}
		if shared >= 0 {
			// The kernel takes a sharing socket's mode, multi-buffer
			// included, from the UMEM's first socket and refuses any
			// flag but this one.
			sa.Flags = unix.XDP_SHARED_UMEM
			sa.SharedUmemFD = uint32(shared)
		}
		var err error
		if s.once {
			err = unix.Bind(s.fd, sa)
		} else {
			err = retryBusy(func() error { return unix.Bind(s.fd, sa) })
		}
		if errors.Is(err, unix.EBUSY) {
			// Another socket holds the queue, in either mode.
			return fmt.Errorf("%w: binding an AF_XDP socket to %s queue %d: %w", ErrRefused, ifc.Name, q, err)
		}
		if err == nil {
			var opt uint32
			n := uint32(4)
			if _, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(s.fd), unix.SOL_XDP, unix.XDP_OPTIONS,
				uintptr(unsafe.Pointer(&opt)), uintptr(unsafe.Pointer(&n)), 0); e == 0 {
				s.zeroCopy = opt&unix.XDP_OPTIONS_ZEROCOPY != 0
			}
			s.sg = m.flags&unix.XDP_USE_SG != 0 || shared >= 0 && l.first.sg
			if l.sg && !s.sg && shared < 0 && len(errs) > 0 {
				l.status.FrameLimit = "no multi-buffer AF_XDP (XDP_USE_SG): " + errors.Join(errs...).Error()
			}
			return nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", m.name, err))
	}
	return fmt.Errorf("%w: binding an AF_XDP socket to %s queue %d: %w", ErrRefused, ifc.Name, q, errors.Join(errs...))
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

// busyPoll asks for busy polling on s where nic_busy_poll says so, and
// notes whether the socket has a NAPI instance for the link to drive. The
// kernel gives a socket its NAPI id when a frame comes (Receive reads it
// again then).
func (l *xskLink) busyPoll(s *xskSock) {
	if !busyPollVar.Get() {
		return
	}
	ok := unix.SetsockoptInt(s.fd, unix.SOL_SOCKET, unix.SO_PREFER_BUSY_POLL, 1) == nil &&
		unix.SetsockoptInt(s.fd, unix.SOL_SOCKET, unix.SO_BUSY_POLL, int(busyUsecsVar.Get())) == nil &&
		unix.SetsockoptInt(s.fd, unix.SOL_SOCKET, unix.SO_BUSY_POLL_BUDGET, int(busyBudgetVar.Get())) == nil
	l.status.BusyPoll = ok
	l.readNAPI(s)
	s.rxWake = s.napi || s.zeroCopy
}

// readNAPI reads whether s has a NAPI instance.
func (l *xskLink) readNAPI(s *xskSock) {
	if id, err := unix.GetsockoptInt(s.fd, unix.SOL_SOCKET, unix.SO_INCOMING_NAPI_ID); l.status.BusyPoll && err == nil && id != 0 {
		s.napi = true
		l.napiPolled.Store(true)
	}
}

func (l *xskLink) Card() Card { return l.card }
func (l *xskLink) MTU() int   { return l.mtu }
func (l *xskLink) Status() Status {
	s := l.status
	s.NAPIPolled = l.napiPolled.Load()
	return s
}

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
	for i, q := range l.peers {
		if q.card == c {
			return Peer(i), nil // known as it is: keep the way found to it
		}
	}
	p := newXSKPeer(l.card, c)
	if !l.subnet.Contains(c.IP) {
		var why string
		var err error
		if p, why, err = l.routedPeer(c); err != nil {
			return 0, err
		}
		if p.kernel {
			slog.Info("nic: a peer off the subnet is reached through the kernel's UDP stack", "interface", l.status.Interface, "peer", c.AddrPort(), "why", why)
		}
	}
	for i, q := range l.peers {
		if q.card.AddrPort() == c.AddrPort() {
			l.setPeer(i, p)
			return Peer(i), nil
		}
	}
	if len(l.peers) > 0xffff {
		return 0, fmt.Errorf("%w: more than 65536 peers", ErrPeer)
	}
	l.peers = append(l.peers, xskPeer{})
	l.setPeer(len(l.peers)-1, p)
	return Peer(len(l.peers) - 1), nil
}

// setPeer makes p the link's peer i, keeping Status's counts.
func (l *xskLink) setPeer(i int, p xskPeer) {
	old := &l.peers[i]
	if old.kernel {
		l.status.KernelPeers--
	} else if !l.subnet.Contains(old.card.IP) && old.card.IP.IsValid() {
		l.status.GatewayPeers--
	}
	if p.kernel {
		l.status.KernelPeers++
	} else if !l.subnet.Contains(p.card.IP) {
		l.status.GatewayPeers++
	}
	*old = p
}

// KernelRouted reports whether the link sends peer p's frames through the
// kernel's UDP stack rather than its AF_XDP sockets (a peer off the
// subnet whose next hop it cannot address).
func (l *xskLink) KernelRouted(p Peer) bool { return int(p) < len(l.peers) && l.peers[p].kernel }

func newXSKPeer(self, c Card) xskPeer {
	p := xskPeer{card: c, tmpl: headerTemplate(self, c)}
	p.sum = templateSum(&p.tmpl)
	return p
}

// Receive reads the receive rings of the link's sockets, a different one
// first each time, and then, if the program passed frames of the link to
// the kernel, its UDP socket. A frame that fails the checks goes straight
// back to its fill ring.
func (l *xskLink) Receive(rx []RxDesc) int {
	if l.closed {
		return 0
	}
	n := 0
	if len(l.socks) == 1 {
		// One socket, the common case: its empty poll stays in line.
		s := &l.first
		if avail := s.rx.consReady(); avail != 0 {
			n = l.receive(s, avail, rx)
		} else {
			// idle's work, written out: the call costs an empty poll
			// a fifth of its time.
			s.rx.consFlush()
			s.comp.consFlush()
			if s.rxWake {
				l.wakeRx(s)
			}
		}
	} else {
		if l.next++; l.next == len(l.socks) {
			l.next = 0
		}
		for k := range l.socks {
			i := l.next + k
			if i >= len(l.socks) {
				i -= len(l.socks)
			}
			s := l.socks[i]
			if avail := s.rx.consReady(); avail == 0 {
				l.idle(s)
			} else if n += l.receive(s, avail, rx[n:]); n == len(rx) {
				break
			}
		}
	}
	// The program writes pending with an atomic add; on amd64 this load
	// is a plain MOV, inlined (asm's are calls).
	if n < len(rx) && atomic.LoadUint64(l.pending) != l.pendingSeen {
		n += l.receiveUDP(rx[n:])
	}
	return n
}

// idle is an empty poll's work on s: publish what the last frames freed,
// then wake the kernel if need be.
func (l *xskLink) idle(s *xskSock) {
	s.rx.consFlush()
	s.comp.consFlush()
	if s.rxWake {
		l.wakeRx(s)
	}
}

// receive reads the avail frames on socket s's receive ring into rx.
func (l *xskLink) receive(s *xskSock, avail uint32, rx []RxDesc) int {
	n, bytes := 0, 0
	var k uint32
	for ; k < avail && n < len(rx); k++ {
		d := &s.rx.descs[(s.rx.cons+k)&s.rx.mask]
		f := Frame(d.Addr >> l.shift)
		end := d.Addr + uint64(d.Len)
		if !l.frames.valid(f) || l.frames.owner[f] != ownFill || end > uint64(f+1)<<l.shift {
			// Not a frame we posted, or past its end:
			// the kernel never does this; count it and leave the frame
			// alone.
			l.c.length.Inc()
			continue
		}
		if d.Options&unix.XDP_PKT_CONTD != 0 {
			// The first chunk of a multi-buffer frame: gather the rest
			// after it, in its buffer.
			m, e, ok := l.gather(s, k+1, avail, end, uint64(f+1)<<l.shift)
			if m == 0 {
				break // its last chunk is not on the ring yet
			}
			k += m
			if !ok {
				l.c.length.Inc()
				s.nFill--
				l.fillPut(s, f)
				continue
			}
			end = e
		}
		s.nFill--
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
			l.fillPut(s, f)
			continue
		}
		l.frames.owner[f] = ownRx
		rx[n] = RxDesc{Frame: f, Data: payload, From: netip.AddrPortFrom(netip.AddrFrom4(ip), port)}
		n++
		bytes += len(payload)
	}
	s.rx.consReleaseLazy(k)
	l.fillFlush(s)
	if n > 0 {
		l.c.rxFrames.Add(uint64(n))
		l.c.rxBytes.Add(uint64(bytes))
		if !s.napiRead && l.status.BusyPoll {
			// The kernel marks a socket with its NAPI instance when a
			// frame comes: look once that has happened.
			s.napiRead = true
			l.readNAPI(s)
			s.rxWake = s.napi || s.zeroCopy
		}
	}
	return n
}

// gather copies the chunks after the first of a multi-buffer frame, the
// descriptors from j on s's receive ring up to the one without
// XDP_PKT_CONTD (of the avail ready), to pos on in the first's buffer,
// which ends at limit, and gives their buffers back to the fill side. It
// returns how many descriptors it took (0, taking none, where the last
// is not among the ready: the kernel publishes a frame's chunks
// together, so it comes), where the frame ends, and false where a chunk
// was not a frame's of the fill side or the frame overran its buffer
// (the kernel never does either; the frame is dropped).
func (l *xskLink) gather(s *xskSock, j, avail uint32, pos, limit uint64) (uint32, uint64, bool) {
	last := j
	for ; last < avail && s.rx.descs[(s.rx.cons+last)&s.rx.mask].Options&unix.XDP_PKT_CONTD != 0; last++ {
	}
	if last == avail {
		return 0, 0, false
	}
	ok := true
	for i := j; i <= last; i++ {
		e := &s.rx.descs[(s.rx.cons+i)&s.rx.mask]
		g := Frame(e.Addr >> l.shift)
		end := e.Addr + uint64(e.Len)
		if !l.frames.valid(g) || l.frames.owner[g] != ownFill || end > uint64(g+1)<<l.shift {
			ok = false // not ours: leave it alone
			continue
		}
		if ok && pos+uint64(e.Len) <= limit {
			copy(l.umem[pos:pos+uint64(e.Len)], l.umem[e.Addr:end])
			pos += uint64(e.Len)
		} else {
			ok = false
		}
		s.nFill--
		l.fillPut(s, g)
	}
	return last - j + 1, pos, ok
}

// receiveUDP reads what the kernel delivered to the link's UDP socket
// (frames the program passed: they came on a queue where the link has
// no socket) into free frames, checks them and hands them to the caller,
// until the socket is empty or rx full. Such a frame goes back to the
// free list on Release.
func (l *xskLink) receiveUDP(rx []RxDesc) int {
	seen := atomic.LoadUint64(l.pending)
	n, bytes := 0, 0
	for n < len(rx) {
		if l.frames.nfree == 0 {
			return n // nothing to read into: the count stays unseen
		}
		f := l.frames.free[l.frames.nfree-1]
		a := uint64(f)<<l.shift + FrameOverhead
		buf := l.umem[a : a+uint64(l.mtu)]
		namelen := uint32(unix.SizeofSockaddrInet4)
		r, _, e := unix.RawSyscall6(unix.SYS_RECVFROM, uintptr(l.reserve), uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)),
			unix.MSG_DONTWAIT|unix.MSG_TRUNC, uintptr(unsafe.Pointer(&l.fbName)), uintptr(unsafe.Pointer(&namelen)))
		l.c.wakeups.Inc()
		if e != 0 {
			l.pendingSeen = seen
			break
		}
		var err error
		if r > uintptr(len(buf)) {
			err = ErrLength
		} else {
			err = check(buf[:r], l.cookie)
		}
		l.c.fallback.Inc()
		if err != nil {
			l.c.drop(err)
			continue
		}
		l.frames.nfree--
		l.frames.owner[f] = ownRx
		l.home[f] = noHome
		port := binary.BigEndian.Uint16((*[2]byte)(unsafe.Pointer(&l.fbName.Port))[:])
		rx[n] = RxDesc{Frame: f, Data: buf[:r], From: netip.AddrPortFrom(netip.AddrFrom4(l.fbName.Addr), port)}
		n++
		bytes += int(r)
	}
	if n > 0 {
		l.c.rxFrames.Add(uint64(n))
		l.c.rxBytes.Add(uint64(bytes))
	}
	return n
}

// wakeRx makes the system call that moves s's receive side on, when the
// socket has a NAPI instance to busy-poll or a zero-copy driver asked
// for one (it ran out of fill frames). Receive calls it only where one
// of those can be (rxWake): in copy mode the kernel never asks, and the
// fill ring's flags share a cache line with its consumer index, which
// the kernel writes on every frame, so reading them on each empty poll
// would cost a cache miss just as a frame comes.
func (l *xskLink) wakeRx(s *xskSock) {
	if !s.napi && !s.fill.needWakeup() {
		return
	}
	unix.RawSyscall6(unix.SYS_RECVFROM, uintptr(s.fd), 0, 0, unix.MSG_DONTWAIT, 0, 0)
	l.c.wakeups.Inc()
}

// fillPut gives f to s's fill side: onto the fill ring (published by
// fillFlush) if it has room and the fill side is under its target, else
// onto the free list.
func (l *xskLink) fillPut(s *xskSock, f Frame) {
	if s.nFill >= s.fillTarget || s.fill.prodFree(s.fillPending+1) <= s.fillPending {
		l.frames.push(f)
		return
	}
	s.fill.addrs[(s.fill.prod+s.fillPending)&s.fill.mask] = uint64(f) << l.shift
	s.fillPending++
	l.frames.owner[f] = ownFill
	s.nFill++
}

// fillFlush publishes the entries fillPut wrote.
func (l *xskLink) fillFlush(s *xskSock) {
	if s.fillPending > 0 {
		s.fill.prodSubmit(s.fillPending)
		s.fillPending = 0
	}
}

// topUpSock moves free frames to the fill ring of s, the link's i-th
// socket, until its fill side is at its target or the ring is full, and
// returns how many it moved.
func (l *xskLink) topUpSock(s *xskSock, i int) int {
	want := min(s.fillTarget-s.nFill, l.frames.nfree)
	if want <= 0 {
		return 0
	}
	n := min(want, int(s.fill.prodFree(uint32(want))))
	for range n {
		l.frames.nfree--
		f := l.frames.free[l.frames.nfree]
		l.home[f] = uint8(i)
		l.fillPut(s, f)
	}
	l.fillFlush(s)
	return n
}

// rxBack is Release's move of a received frame: to the fill side of the
// socket that received it, or the free list.
func (l *xskLink) rxBack(f Frame) {
	switch h := l.home[f]; h {
	case 0:
		l.fillPut(&l.first, f)
	case noHome:
		l.frames.push(f)
	default:
		l.fillPut(l.socks[h], f)
	}
}

func (l *xskLink) Release(fs []Frame) error {
	if l.closed {
		return ErrClosed
	}
	defer l.fillFlushAll()
	for _, f := range fs {
		if !l.frames.release(f, l.rxBack) {
			return fmt.Errorf("%w: releasing frame %d (%s)", ErrNotOwned, f, ownerName(&l.frames, f))
		}
	}
	return nil
}

// fillFlushAll publishes what fillPut wrote on every socket.
func (l *xskLink) fillFlushAll() {
	for _, sk := range l.socks {
		l.fillFlush(sk)
	}
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
	s := &l.first
	room := int(s.tx.prodFree(uint32(len(tx))))
	var err error
	i, q, nq, bytes := 0, 0, 0, 0 // frames taken, transmit ring slots filled, frames on them, bytes
	for ; i < len(tx); i++ {
		d := &tx[i]
		if q == room {
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
		if p.kernel {
			if !l.sendKernel(p, base, d) {
				break // the socket's buffer is full: the caller polls and tries again
			}
			bytes += int(d.Len)
			continue
		}
		total := FrameOverhead + uint32(d.Len)
		if total > l.chunk {
			// Multi-buffer: a descriptor a chunk, all but the last
			// marked to continue.
			nd := int((total + l.chunk - 1) / l.chunk)
			if q+nd > room {
				if room = int(s.tx.prodFree(uint32(q + nd))); q+nd > room {
					l.c.txFull.Inc()
					break
				}
			}
			putHeaders(l.umem[base:base+FrameOverhead], &p.tmpl, p.sum, int(d.Len))
			for off := uint32(0); off < total; off += l.chunk {
				slot := &s.tx.descs[(s.tx.prod+uint32(q))&s.tx.mask]
				q++
				slot.Addr, slot.Len, slot.Options = base+uint64(off), min(l.chunk, total-off), unix.XDP_PKT_CONTD
				if off+l.chunk >= total {
					slot.Options = 0
				}
			}
			l.txLeft[d.Frame] = uint8(nd)
		} else {
			putHeaders(l.umem[base:base+FrameOverhead], &p.tmpl, p.sum, int(d.Len))
			slot := &s.tx.descs[(s.tx.prod+uint32(q))&s.tx.mask]
			q++
			slot.Addr, slot.Len, slot.Options = base, total, 0
		}
		nq++
		if d.Keep {
			l.frames.owner[d.Frame] = ownTxKeep
		} else {
			l.frames.owner[d.Frame] = ownTx
		}
		bytes += int(d.Len)
	}
	if q > 0 {
		s.tx.prodSubmit(uint32(q))
		l.inflight += nq
		l.kick()
	}
	if i > 0 {
		l.c.txFrames.Add(uint64(i))
		l.c.txBytes.Add(uint64(bytes))
	}
	return i, err
}

// sendKernel sends frame d to a KernelPeers peer p through the link's UDP
// socket, which the kernel routes, and completes it at once (kept frames
// go back to the caller). It reports false, taking nothing, when the
// socket's buffer is full; any other error loses the frame, counted, as
// the wire would.
func (l *xskLink) sendKernel(p *xskPeer, base uint64, d *TxDesc) bool {
	b := l.umem[base+FrameOverhead : base+FrameOverhead+uint64(d.Len)]
	_, _, e := unix.RawSyscall6(unix.SYS_SENDTO, uintptr(l.reserve), uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(len(b)),
		unix.MSG_DONTWAIT, uintptr(unsafe.Pointer(&p.sa)), unix.SizeofSockaddrInet4)
	switch e {
	case 0:
	case unix.EAGAIN, unix.ENOBUFS, unix.EINTR:
		return false
	default:
		l.c.txErrors.Inc()
	}
	l.c.kernelFrames.Inc()
	if d.Keep {
		l.frames.owner[d.Frame] = ownUser
	} else {
		l.frames.push(d.Frame)
	}
	return true
}

// kick wakes the kernel's transmit side if it asked to be woken.
func (l *xskLink) kick() {
	s := &l.first
	if !s.tx.needWakeup() {
		return
	}
	unix.RawSyscall6(unix.SYS_SENDTO, uintptr(s.fd), 0, 0, unix.MSG_DONTWAIT, 0, 0)
	l.c.kicks.Inc()
}

// reap takes completed sends off the completion ring and returns how
// many.
func (l *xskLink) reap() int {
	c := &l.first.comp
	n := c.consReady()
	done := n // frames completed
	for i := range n {
		f := Frame(c.addrs[(c.cons+i)&c.mask] >> l.shift)
		if l.sg && l.frames.valid(f) {
			// A frame sent in nd chunks completes with its nd-th.
			if left := l.txLeft[f]; left > 1 {
				l.txLeft[f] = left - 1
				done--
				continue
			}
		}
		if !l.frames.completed(f) {
			l.c.length.Inc() // a completion for a frame not in flight: the kernel never does this
		}
	}
	if n > 0 {
		c.consReleaseLazy(n)
		l.inflight -= int(done)
	}
	return int(done)
}

// sweepEvery is how many Poll calls pass between reads of the UDP socket
// whatever the program counted: frames reach it that the program never
// saw (while no program is attached, say).
const sweepEvery = 1024

func (l *xskLink) Poll() int {
	if l.closed {
		return 0
	}
	n := l.reap()
	for i, s := range l.socks {
		n += l.topUpSock(s, i)
		s.rx.consFlush()
		s.comp.consFlush()
	}
	// A kick sends at most a budget of frames (32 in copy mode): kick
	// again while the kernel has left some on the ring.
	if l.inflight > 0 && l.first.tx.unconsumed() > 0 {
		l.kick()
	}
	if l.polls++; l.polls%sweepEvery == 0 {
		l.pendingSeen-- // Receive reads the UDP socket next time
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

// kernelStats reads the XDP_STATISTICS of the link's sockets, summed.
func (l *xskLink) kernelStats() XSKStats {
	var t XSKStats
	for _, sk := range l.socks {
		var st unix.XDPStatistics
		n := uint32(unsafe.Sizeof(st))
		if _, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(sk.fd), unix.SOL_XDP, unix.XDP_STATISTICS,
			uintptr(unsafe.Pointer(&st)), uintptr(unsafe.Pointer(&n)), 0); e != 0 {
			continue
		}
		t.RxDropped += st.Rx_dropped
		t.RxInvalid += st.Rx_invalid_descs
		t.TxInvalid += st.Tx_invalid_descs
		t.RxRingFull += st.Rx_ring_full
		t.FillRingEmpty += st.Rx_fill_ring_empty_descs
		t.TxRingEmptyDesc += st.Tx_ring_empty_descs
	}
	return t
}

func (l *xskLink) programStats() ProgramStats {
	c, err := l.prog.obj.counts(l.slot)
	if err != nil {
		return ProgramStats{}
	}
	return ProgramStats{Redirected: c.Redirected, Passed: c.Passed, Dropped: c.Dropped, Foreign: c.Foreign, Misqueued: c.Misqueued}
}

// SetDropRate changes the probability of dropping a frame of ours in the
// XDP program, for loss tests.
func (l *xskLink) SetDropRate(p float64) error { return l.prog.obj.setDropRate(l.slot, p) }

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

// release undoes what openXDP did, in reverse: the port and sockets come
// out of the program first, so that no frame is redirected to a closing
// socket.
func (l *xskLink) release() error {
	var errs []error
	if l.prog != nil {
		if l.slot != 0 {
			errs = append(errs, l.prog.obj.removePort(l.port, l.slot))
			for _, q := range l.queues {
				l.prog.obj.clearSocket(q, l.slot)
			}
		}
		errs = append(errs, l.prog.release())
		l.prog = nil
	}
	// The sockets sharing the UMEM close before the one that registered it.
	for i := len(l.socks) - 1; i >= 0; i-- {
		errs = append(errs, l.socks[i].close())
	}
	l.socks = nil
	if l.umem != nil {
		errs = append(errs, unix.Munmap(l.umem))
		l.umem = nil
	}
	if l.reserve >= 0 {
		errs = append(errs, unix.Close(l.reserve))
		l.reserve = -1
	}
	l.routes.close()
	l.routes = routeTables{}
	if l.ethFD >= 0 {
		if l.status.Steered {
			errs = append(errs, unsteer(l.ethFD, l.status.Interface, l.steerAt))
		}
		errs = append(errs, unix.Close(l.ethFD))
		l.ethFD = -1
	}
	return errors.Join(errs...)
}

// close closes the socket and unmaps its rings.
func (s *xskSock) close() error {
	var err error
	if s.fd >= 0 {
		err = unix.Close(s.fd)
		s.fd = -1
	}
	for _, r := range []*xskRing{&s.rx.xskRing, &s.tx.xskRing, &s.fill.xskRing, &s.comp.xskRing} {
		r.unmap()
	}
	return err
}

// audit checks the frame ownership record against the rings: every
// frame has one owner, each fill ring holds only frames of its socket's
// fill side, the transmit ring only frames in flight, and the counts
// agree. Tests call it between operations.
func (l *xskLink) audit() error {
	n, err := l.frames.audit()
	if err != nil {
		return err
	}
	nFill := 0
	for i, s := range l.socks {
		nFill += s.nFill
		for p, c := s.fill.prod, asmLoad(s.fill.consumer); c != p; c++ {
			f := Frame(s.fill.addrs[c&s.fill.mask] >> l.shift)
			if o := ownerName(&l.frames, f); o != "fill" || int(l.home[f]) != i {
				return fmt.Errorf("fill ring %d holds frame %d owned by %s of socket %d", i, f, o, l.home[f])
			}
		}
	}
	if n[ownFill] != nFill {
		return fmt.Errorf("%d frames marked fill, the link counts %d", n[ownFill], nFill)
	}
	if tx := n[ownTx] + n[ownTxKeep] + n[ownTxFree]; tx != l.inflight {
		return fmt.Errorf("%d frames marked in flight, the link counts %d", tx, l.inflight)
	}
	t := &l.first.tx
	for p, c := t.prod, asmLoad(t.consumer); c != p; c++ {
		f := Frame(t.descs[c&t.mask].Addr >> l.shift)
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
