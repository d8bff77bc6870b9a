package nic

import (
	"encoding/binary"
	"fmt"
	"math"
	"net/netip"
	"strconv"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A UDP link, the way a frame goes:
//
// Receive: a batch of frames stays posted, each with its iovec in one
// recvmmsg table; Receive makes one non-blocking recvmmsg into it, checks
// what came, hands the good frames to the caller and posts free frames in
// their place; a frame that fails the checks stays posted. Release puts
// a frame back on the free list.
//
// Send: the caller writes its Tachyon frame at Bytes, as on an XDP link;
// Send points one mmsghdr at each frame and its peer's address and sends
// them with sendmmsg. The kernel has copied them when it returns, so each
// frame goes straight back to the free list, or to the caller if kept.
//
// Both calls are raw system calls on a non-blocking socket: the progress
// engine polls the link, Go's netpoller never sees it.

// udpLink is a Link over a kernel UDP socket.
type udpLink struct {
	fd     int
	buf    []byte
	shift  uint
	mtu    int
	cookie uint64
	frames frames

	// The receive batch: posted[i] is received into by rhdrs[i]. vlen
	// is how many the next recvmmsg asks for.
	posted  []Frame
	nposted int
	vlen    int
	rhdrs   []unix.Mmsghdr
	riov    []unix.Iovec
	rnames  []unix.RawSockaddrInet4

	// The send batch.
	shdrs []unix.Mmsghdr
	siov  []unix.Iovec

	peers []udpPeer

	drop uint64 // drop a frame when the next random number is below this
	rng  injector

	c      counters
	card   Card
	status Status
	closed bool
}

// udpPeer is a peer's address, and the socket connected to it that
// sends its frames, or -1: a connected socket saves the kernel a route
// lookup on every datagram (about a tenth of a ping-pong's latency).
type udpPeer struct {
	card Card
	sa   unix.RawSockaddrInet4
	fd   int
}

// openUDP opens a UDP link; fallback is why Open did not take XDP.
func openUDP(cfg Config, fallback string) (l *udpLink, err error) {
	var ip netip.Addr
	var mac [6]byte
	mtu := 1500
	dev := ""
	if cfg.Interface != "" {
		ifc, a, _, err := lookupInterface(cfg.Interface, cfg.Addr.Addr())
		if err != nil {
			return nil, err
		}
		ip, mtu, dev = a, ifc.MTU, ifc.Name
		copy(mac[:], ifc.HardwareAddr)
	} else {
		ip = cfg.Addr.Addr().Unmap()
		if !ip.Is4() || ip.IsUnspecified() {
			return nil, fmt.Errorf("%w: a UDP link needs an interface or an IPv4 address to bind (IPv6 is not supported yet)", ErrConfig)
		}
	}
	minSize, nframes, _, err := xskSizes()
	if err != nil {
		return nil, err
	}
	frameSize := bufferSize(minSize, mtu)
	batch := int(batchVar.Get())
	if int(nframes) < 2*batch {
		return nil, fmt.Errorf("%w: nic_frames %d is less than twice nic_udp_batch %d", ErrConfig, nframes, batch)
	}
	l = &udpLink{
		fd:     -1,
		buf:    make([]byte, int(frameSize)*int(nframes)),
		shift:  uint(log2(frameSize)),
		cookie: cfg.Cookie,
		frames: newFrames(int(nframes)),
		posted: make([]Frame, batch),
		rhdrs:  make([]unix.Mmsghdr, batch),
		riov:   make([]unix.Iovec, batch),
		rnames: make([]unix.RawSockaddrInet4, batch),
		shdrs:  make([]unix.Mmsghdr, batch),
		siov:   make([]unix.Iovec, batch),
		rng:    injector(cfg.Cookie | 1),
		vlen:   1,
	}
	// The same MTU as an XDP link on this interface, so that the two talk.
	l.mtu = linkMTU(mtu, frameSize)
	if l.mtu < HeaderLen+MessageLen {
		return nil, fmt.Errorf("%w: MTU %d leaves no room for a Tachyon frame", ErrInterface, mtu)
	}
	if err := l.SetDropRate(dropRateVar.Get()); err != nil {
		return nil, fmt.Errorf("%w: nic_drop_rate: %v", ErrConfig, err)
	}
	l.fd, err = udpSocket(netip.AddrPortFrom(ip, cfg.Addr.Port()), dev)
	if err != nil {
		return nil, fmt.Errorf("nic: opening a UDP link: %w", err)
	}
	port, err := boundPort(l.fd)
	if err != nil {
		unix.Close(l.fd)
		return nil, err
	}
	size := int(udpBufVar.Get())
	for _, o := range [][2]int{{unix.SO_RCVBUFFORCE, unix.SO_RCVBUF}, {unix.SO_SNDBUFFORCE, unix.SO_SNDBUF}} {
		if unix.SetsockoptInt(l.fd, unix.SOL_SOCKET, o[0], size) != nil {
			unix.SetsockoptInt(l.fd, unix.SOL_SOCKET, o[1], size)
		}
	}
	for i := range l.rhdrs {
		l.rhdrs[i].Hdr.Iov = &l.riov[i]
		l.rhdrs[i].Hdr.Iovlen = 1
		l.rhdrs[i].Hdr.Name = (*byte)(unsafe.Pointer(&l.rnames[i]))
		l.shdrs[i].Hdr.Iov = &l.siov[i]
		l.shdrs[i].Hdr.Iovlen = 1
		l.shdrs[i].Hdr.Namelen = unix.SizeofSockaddrInet4
	}
	l.post()
	l.card = Card{Mode: ModeUDP, IP: ip, Port: port, MAC: mac, MTU: uint16(l.mtu)}
	l.status = Status{Mode: ModeUDP, Interface: dev, Chosen: cfg.Chosen, Fallback: fallback, RxCapacity: udpRxCapacity(l.fd, int(frameSize), int(nframes))}
	if dev != "" {
		l.status.Driver = driverString(dev)
	}
	if l.mtu < mtu-ipv4Len-udpLen {
		l.status.FrameLimit = "nic_max_mtu " + strconv.Itoa(int(maxMTUVar.Get()))
	}
	l.c = newCounters()
	return l, nil
}

// udpRxCapacity is Status.RxCapacity of a UDP link on socket fd: the
// receive buffer the kernel gave it (as SO_RCVBUF reads it, which counts
// each datagram's overhead) in datagrams of two frame buffers each, at
// most half the link's nframes, the most it can hold received.
func udpRxCapacity(fd, frameSize, nframes int) int {
	n, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF)
	if err != nil {
		return 0
	}
	return max(min(n/(2*frameSize), nframes/2), 1)
}

func (l *udpLink) Card() Card     { return l.card }
func (l *udpLink) MTU() int       { return l.mtu }
func (l *udpLink) Status() Status { return l.status }

func (l *udpLink) AddPeer(c Card) (Peer, error) {
	if !c.IP.Is4() || c.Port == 0 {
		return 0, fmt.Errorf("%w: %v is not an IPv4 address and port", ErrPeer, c.AddrPort())
	}
	for i := range l.peers {
		if l.peers[i].card.AddrPort() == c.AddrPort() {
			l.peers[i].card = c
			return Peer(i), nil
		}
	}
	if len(l.peers) > 0xffff {
		return 0, fmt.Errorf("%w: more than 65536 peers", ErrPeer)
	}
	p := udpPeer{card: c, sa: unix.RawSockaddrInet4{Family: unix.AF_INET, Addr: c.IP.As4()}, fd: -1}
	binary.BigEndian.PutUint16((*[2]byte)(unsafe.Pointer(&p.sa.Port))[:], c.Port)
	if len(l.peers) < int(connectedVar.Get()) {
		p.fd = l.connectTo(c.AddrPort())
	}
	l.peers = append(l.peers, p)
	return Peer(len(l.peers) - 1), nil
}

// connectTo opens a socket on the link's address, with a port of the
// kernel's, connected to ap, for sending only; -1 if it cannot (the
// frames then go through the link's own socket). Frames sent through it
// come from that port, which the protocol never looks at: a peer knows
// its sender by the header's endpoint.
func (l *udpLink) connectTo(ap netip.AddrPort) int {
	fd, err := udpSocket(netip.AddrPortFrom(l.card.IP, 0), l.status.Interface)
	if err != nil {
		return -1
	}
	// Nothing is ever read from it: keep what strays in small.
	unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 4096)
	unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF, int(udpBufVar.Get()))
	if err := unix.Connect(fd, &unix.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().As4()}); err != nil {
		unix.Close(fd)
		return -1
	}
	return fd
}

// post fills the receive batch from the free list.
func (l *udpLink) post() {
	for l.nposted < len(l.posted) && l.frames.nfree > 0 {
		l.frames.nfree--
		l.setPosted(l.nposted, l.frames.free[l.frames.nfree])
		l.nposted++
	}
}

func (l *udpLink) setPosted(i int, f Frame) {
	l.frames.owner[f] = ownFill
	l.posted[i] = f
	l.riov[i].Base = &l.buf[uint64(f)<<l.shift]
	l.riov[i].SetLen(l.mtu)
}

func (l *udpLink) Receive(rx []RxDesc) int {
	if l.closed {
		return 0
	}
	if l.nposted < len(l.posted) {
		l.post()
	}
	want := min(len(rx), l.nposted, l.vlen)
	if want == 0 {
		return 0
	}
	for i := range want {
		l.rhdrs[i].Hdr.Namelen = unix.SizeofSockaddrInet4
		l.rhdrs[i].Hdr.Flags = 0
	}
	var r uintptr
	var e unix.Errno
	if want == 1 {
		// recvfrom costs the kernel less than recvmsg or recvmmsg. With
		// MSG_TRUNC it returns a longer datagram's whole length.
		h := &l.rhdrs[0]
		r, _, e = unix.RawSyscall6(unix.SYS_RECVFROM, uintptr(l.fd), uintptr(unsafe.Pointer(l.riov[0].Base)), uintptr(l.mtu),
			unix.MSG_DONTWAIT|unix.MSG_TRUNC, uintptr(unsafe.Pointer(h.Hdr.Name)), uintptr(unsafe.Pointer(&h.Hdr.Namelen)))
		if e == 0 {
			if r > uintptr(l.mtu) {
				h.Hdr.Flags, r = unix.MSG_TRUNC, uintptr(l.mtu)
			}
			h.Len, r = uint32(r), 1
		}
	} else {
		r, _, e = unix.RawSyscall6(unix.SYS_RECVMMSG, uintptr(l.fd), uintptr(unsafe.Pointer(&l.rhdrs[0])),
			uintptr(want), unix.MSG_DONTWAIT, 0, 0)
	}
	l.c.wakeups.Inc()
	if e != 0 || r == 0 {
		return 0
	}
	// Ask for more next time when this call filled its batch, for as
	// many as came otherwise: recvmmsg tries for one datagram more than
	// it finds, which on a ping-pong costs a failed receive a frame.
	if int(r) == want {
		l.vlen = min(2*want, len(l.posted))
	} else {
		l.vlen = int(r)
	}
	n, bytes := 0, 0
	for i := 0; i < int(r); i++ {
		h := &l.rhdrs[i]
		f := l.posted[i]
		data := l.buf[uint64(f)<<l.shift : uint64(f)<<l.shift+uint64(h.Len)]
		var err error
		if h.Hdr.Flags&unix.MSG_TRUNC != 0 {
			err = ErrLength
		} else {
			err = check(data, l.cookie)
		}
		if err != nil {
			l.c.drop(err)
			continue
		}
		if l.drop != 0 && l.rng.next() < l.drop {
			l.c.injected.Inc()
			continue
		}
		l.frames.owner[f] = ownRx
		sa := &l.rnames[i]
		port := binary.BigEndian.Uint16((*[2]byte)(unsafe.Pointer(&sa.Port))[:])
		rx[n] = RxDesc{Frame: f, Data: data, From: netip.AddrPortFrom(netip.AddrFrom4(sa.Addr), port)}
		n++
		bytes += len(data)
		l.posted[i] = noFrame // taken; replaced below
	}
	if n > 0 {
		l.repost(int(r))
		l.c.rxFrames.Add(uint64(n))
		l.c.rxBytes.Add(uint64(bytes))
	}
	return n
}

// noFrame marks a receive slot whose frame went to the caller.
const noFrame = Frame(math.MaxUint32)

// repost fills the slots among the first k that Receive emptied: with
// free frames while there are any, else by moving the last posted frame
// down, so that posted[:nposted] stays dense.
func (l *udpLink) repost(k int) {
	for i := 0; i < k && i < l.nposted; i++ {
		if l.posted[i] != noFrame {
			continue
		}
		if l.frames.nfree > 0 {
			l.frames.nfree--
			l.setPosted(i, l.frames.free[l.frames.nfree])
			continue
		}
		// No free frame: fill the hole with the last posted one.
		for l.nposted > i && l.posted[l.nposted-1] == noFrame {
			l.nposted--
		}
		if l.nposted > i+1 {
			l.nposted--
			l.setPosted(i, l.posted[l.nposted])
		} else {
			l.nposted = i
		}
	}
}

// SetDropRate changes the probability of dropping a received frame of
// ours, for loss tests.
func (l *udpLink) SetDropRate(p float64) error {
	if !(p >= 0 && p <= 1) {
		return fmt.Errorf("drop rate %v is not in [0, 1]", p)
	}
	l.drop = threshold(p)
	return nil
}

func (l *udpLink) Release(fs []Frame) error {
	if l.closed {
		return ErrClosed
	}
	for _, f := range fs {
		if !l.frames.release(f, l.frames.push) {
			return fmt.Errorf("%w: releasing frame %d (%s)", ErrNotOwned, f, ownerName(&l.frames, f))
		}
	}
	return nil
}

func (l *udpLink) Alloc(fs []Frame) int {
	if l.closed {
		return 0
	}
	return l.frames.pop(fs, ownUser)
}

func (l *udpLink) Bytes(f Frame) []byte {
	if !l.frames.valid(f) {
		return nil
	}
	a := uint64(f) << l.shift
	return l.buf[a : a+uint64(l.mtu) : a+uint64(l.mtu)]
}

// Send sends tx in batches, one sendmmsg (or, for one frame, sendto)
// for each run of frames that go out through the same socket.
func (l *udpLink) Send(tx []TxDesc) (int, error) {
	if l.closed {
		return 0, ErrClosed
	}
	done := 0
	for done < len(tx) {
		fd, k, err := l.prepare(tx[done:min(len(tx), done+len(l.shdrs))])
		sent := 0
		if k > 0 {
			sent = l.sendBatch(fd, tx[done:done+k])
		}
		done += sent
		if err != nil && sent == k {
			return done, err
		}
		if sent < k {
			l.c.txFull.Inc()
			return done, nil
		}
	}
	return done, nil
}

// prepare points the send batch at the frames of tx, up to the first it
// may not send or that goes through another socket than the first, and
// returns that socket, how many, and why it stopped if for an error.
func (l *udpLink) prepare(tx []TxDesc) (fd, k int, err error) {
	fd = -1
	for i := range tx {
		d := &tx[i]
		if err := l.frames.sendable(d.Frame); err != nil {
			return fd, i, fmt.Errorf("%w: sending frame %d (%s)", err, d.Frame, ownerName(&l.frames, d.Frame))
		}
		if int(d.Peer) >= len(l.peers) {
			return fd, i, fmt.Errorf("%w: peer %d", ErrPeer, d.Peer)
		}
		if int(d.Len) > l.mtu {
			return fd, i, fmt.Errorf("%w: %d bytes, MTU %d", ErrTooLong, d.Len, l.mtu)
		}
		p := &l.peers[d.Peer]
		pfd := l.fd
		h := &l.shdrs[i].Hdr
		if p.fd >= 0 {
			pfd, h.Name, h.Namelen = p.fd, nil, 0
		} else {
			h.Name, h.Namelen = (*byte)(unsafe.Pointer(&p.sa)), unix.SizeofSockaddrInet4
		}
		if i > 0 && pfd != fd {
			return fd, i, nil
		}
		fd = pfd
		l.siov[i].Base = &l.buf[uint64(d.Frame)<<l.shift]
		l.siov[i].SetLen(int(d.Len))
	}
	return fd, len(tx), nil
}

// sendBatch sends the batch prepared for tx through fd and returns how
// many went. A datagram the kernel refuses for good (no route, a
// firewall) counts as sent and lost, as the network would lose it: the
// reliable transport above retransmits or gives up on the peer. A full
// socket buffer stops the batch.
func (l *udpLink) sendBatch(fd int, tx []TxDesc) int {
	sent := 0
	for sent < len(tx) {
		var r uintptr
		var e unix.Errno
		if len(tx)-sent == 1 {
			h := &l.shdrs[sent].Hdr
			_, _, e = unix.RawSyscall6(unix.SYS_SENDTO, uintptr(fd), uintptr(unsafe.Pointer(l.siov[sent].Base)), uintptr(l.siov[sent].Len),
				unix.MSG_DONTWAIT, uintptr(unsafe.Pointer(h.Name)), uintptr(h.Namelen))
			r = 1
		} else {
			r, _, e = unix.RawSyscall6(unix.SYS_SENDMMSG, uintptr(fd), uintptr(unsafe.Pointer(&l.shdrs[sent])),
				uintptr(len(tx)-sent), unix.MSG_DONTWAIT, 0, 0)
		}
		l.c.kicks.Inc()
		switch {
		case e == 0:
			sent += int(r)
		case e == unix.EAGAIN || e == unix.ENOBUFS || e == unix.EINTR:
			l.completeSent(tx[:sent])
			return sent
		default:
			l.c.txErrors.Inc()
			sent++ // the first of the rest is lost
		}
	}
	l.completeSent(tx)
	return sent
}

// completeSent moves sent frames to the free list, or kept ones back to
// the caller, and counts them.
func (l *udpLink) completeSent(tx []TxDesc) {
	bytes := 0
	for i := range tx {
		if tx[i].Keep {
			l.frames.owner[tx[i].Frame] = ownUser
		} else {
			l.frames.push(tx[i].Frame)
		}
		bytes += int(tx[i].Len)
	}
	l.c.txFrames.Add(uint64(len(tx)))
	l.c.txBytes.Add(uint64(bytes))
}

// Poll keeps the receive batch posted; sends complete in Send.
func (l *udpLink) Poll() int {
	if l.closed {
		return 0
	}
	n := l.nposted
	l.post()
	return l.nposted - n
}

func (l *udpLink) Stats() Stats { return l.c.stats() }

func (l *udpLink) Close() error {
	if l.closed {
		return ErrClosed
	}
	l.closed = true
	l.c.close()
	for i := range l.peers {
		if l.peers[i].fd >= 0 {
			unix.Close(l.peers[i].fd)
			l.peers[i].fd = -1
		}
	}
	err := unix.Close(l.fd)
	l.fd = -1
	return err
}

// audit checks the frame ownership record against the receive batch.
func (l *udpLink) audit() error {
	n, err := l.frames.audit()
	if err != nil {
		return err
	}
	if n[ownFill] != l.nposted {
		return fmt.Errorf("%d frames marked fill, %d posted", n[ownFill], l.nposted)
	}
	for _, f := range l.posted[:l.nposted] {
		if o := ownerName(&l.frames, f); o != "fill" {
			return fmt.Errorf("receive batch holds frame %d owned by %s", f, o)
		}
	}
	if tx := n[ownTx] + n[ownTxKeep] + n[ownTxFree]; tx != 0 {
		return fmt.Errorf("%d frames marked in flight on a UDP link", tx)
	}
	return nil
}
