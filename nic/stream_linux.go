package nic

import (
	"errors"
	"fmt"
	"io"
	"net/netip"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A stream is the bulk lane beside a link: a kernel TCP connection that
// carries large messages whole, where frames would cost the kernel a
// packet each. It is polled like a link: non-blocking raw system calls,
// no goroutine, Go's netpoller never sees it, and no call allocates.

// StreamListener takes the streams peers dial to a link's address.
type StreamListener struct {
	fd   int
	port uint16
}

// ListenStream listens for streams on ip, at a port the kernel picks,
// with room in its accept queue for backlog streams not yet accepted (at
// least 128; the kernel's net.core.somaxconn caps it). A job sizes it to
// its peers, who may all dial at once: a stream dialed into a full queue
// is not lost, but its handshake waits a second or more for the retry.
func ListenStream(ip netip.Addr, backlog int) (*StreamListener, error) {
	if !ip.Is4() {
		return nil, fmt.Errorf("nic: stream listener on %v: IPv4 only", ip)
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("nic: stream listener: %w", err)
	}
	sa := &unix.SockaddrInet4{Addr: ip.As4()}
	if err := unix.Bind(fd, sa); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("nic: stream listener on %v: %w", ip, err)
	}
	if err := unix.Listen(fd, max(backlog, 128)); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("nic: stream listener on %v: %w", ip, err)
	}
	name, err := unix.Getsockname(fd)
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("nic: stream listener on %v: %w", ip, err)
	}
	return &StreamListener{fd: fd, port: uint16(name.(*unix.SockaddrInet4).Port)}, nil
}

// Port returns the port the listener took.
func (l *StreamListener) Port() uint16 { return l.port }

// Accept returns a stream a peer dialed, or nil and no error if none is
// waiting. An error wrapping ErrStreamBusy is the process's or the
// kernel's lack of resources (descriptors, memory): the streams wait in
// the queue, to be accepted later. Any other error is the listener's
// end.
func (l *StreamListener) Accept() (*Stream, error) {
	for {
		fd, _, err := unix.Accept4(l.fd, unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
		switch {
		case err == nil:
			s := &Stream{fd: fd}
			s.setup()
			return s, nil
		case err == unix.EINTR || err == unix.ECONNABORTED:
			continue
		case err == unix.EAGAIN:
			return nil, nil
		case err == unix.EMFILE || err == unix.ENFILE || err == unix.ENOBUFS || err == unix.ENOMEM:
			return nil, fmt.Errorf("nic: accepting a stream: %w (%w)", ErrStreamBusy, err)
		}
		return nil, fmt.Errorf("nic: accepting a stream: %w", err)
	}
}

// Close stops listening; streams already accepted stay open.
func (l *StreamListener) Close() error {
	return closeFD(&l.fd)
}

// Stream is one TCP connection of the bulk lane, in one direction by use:
// the dialer writes, the acceptor reads. Write and Read never block: they
// return 0 and no error when the kernel has no room or nothing has come.
type Stream struct {
	fd  int
	iov [StreamBuffers]unix.Iovec
}

// DialStream starts a connection to a peer's listener and returns at once;
// writes wait (return 0) until it is up, and fail if it could not be made
// (ErrStreamLost, as DialStream itself where the kernel knows at once).
func DialStream(to netip.AddrPort) (*Stream, error) {
	if !to.Addr().Is4() {
		return nil, fmt.Errorf("nic: stream to %v: IPv4 only", to)
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("nic: stream to %v: %w", to, err)
	}
	s := &Stream{fd: fd}
	s.setup()
	err = unix.Connect(fd, &unix.SockaddrInet4{Addr: to.Addr().As4(), Port: int(to.Port())})
	if err != nil && err != unix.EINPROGRESS {
		unix.Close(fd)
		if e, ok := err.(unix.Errno); ok {
			return nil, streamError("dialing "+to.String(), e)
		}
		return nil, fmt.Errorf("nic: stream to %v: %w", to, err)
	}
	return s, nil
}

// setup turns Nagle off: a message's last segment goes at once.
func (s *Stream) setup() {
	unix.SetsockoptInt(s.fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
}

// Write writes as much of bufs, in order, as the kernel takes now, in one
// system call, and returns how many bytes it took. One call takes at most
// StreamBuffers buffers (empty ones not counted); the rest wait for the
// next.
func (s *Stream) Write(bufs ...[]byte) (int, error) {
	n := 0
	for _, p := range bufs {
		if len(p) > 0 && n < len(s.iov) {
			s.iov[n].Base = unsafe.SliceData(p)
			s.iov[n].SetLen(len(p))
			n++
		}
	}
	if n == 0 {
		return 0, nil
	}
	for {
		r, _, e := unix.Syscall(unix.SYS_WRITEV, uintptr(s.fd), uintptr(unsafe.Pointer(&s.iov[0])), uintptr(n))
		switch e {
		case 0:
			return int(r), nil
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return 0, nil
		}
		return 0, streamError("writing", e)
	}
}

// Read reads what has come, up to len(b) bytes, and returns how many:
// 0 and no error if nothing has, io.EOF once the peer closed and all it
// sent has been read.
func (s *Stream) Read(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	for {
		r, _, e := unix.Syscall(unix.SYS_READ, uintptr(s.fd), uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(len(b)))
		switch e {
		case 0:
			if r == 0 {
				return 0, io.EOF
			}
			return int(r), nil
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return 0, nil
		}
		return 0, streamError("reading", e)
	}
}

// SetReadLowWater sets the socket's SO_RCVLOWAT to n bytes: the kernel
// then acknowledges data at once while less than n waits unread, and
// makes its receive buffer hold at least n. Reads still return whatever
// has come.
func (s *Stream) SetReadLowWater(n int) error {
	if err := unix.SetsockoptInt(s.fd, unix.SOL_SOCKET, unix.SO_RCVLOWAT, n); err != nil {
		return fmt.Errorf("nic: stream low water %d: %w", n, err)
	}
	return nil
}

// streamError wraps a stream's system call error; a peer that went away
// (reset, refused, broken pipe) matches ErrStreamLost.
func streamError(what string, e unix.Errno) error {
	switch e {
	case unix.ECONNRESET, unix.ECONNREFUSED, unix.EPIPE, unix.ETIMEDOUT, unix.EHOSTUNREACH, unix.ENETUNREACH:
		return fmt.Errorf("%w: %s: %w", ErrStreamLost, what, e)
	}
	return fmt.Errorf("nic: stream %s: %w", what, e)
}

// ErrStreamLost reports a stream whose peer is gone or was never reached.
var ErrStreamLost = errors.New("nic: stream lost")

// Close closes the stream. What was written still goes to the peer
// (TCP's orderly close).
func (s *Stream) Close() error {
	return closeFD(&s.fd)
}

// closeFD closes the descriptor *fd and marks it closed (-1): ErrClosed if
// it was.
func closeFD(fd *int) error {
	if *fd < 0 {
		return ErrClosed
	}
	err := unix.Close(*fd)
	*fd = -1
	return err
}

// ErrStreamBusy reports a stream the listener could not accept for want of
// descriptors or memory; it waits in the queue for a later Accept.
var ErrStreamBusy = errors.New("nic: stream listener out of resources")
