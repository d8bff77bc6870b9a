package nic

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

// One XDP program serves every Tachyon link on an interface: an interface
// takes one program, and the ranks of a job that share a host (and jobs
// that share it) each have links there. The first link on the interface
// loads the program, attaches it and serves it on an abstract Unix socket
// named after the interface (abstract names belong to the network
// namespace, so they name the host's interface and no other); each later
// link, of this process or another, connects there (or, that process
// gone, to any other holder's socket, which /proc/net/unix lists) and
// receives, with SCM_RIGHTS, the program's attachment and its maps, and
// its process then serves them too. Each link then adds
// its port and its sockets to the maps (xdpprog_linux.go) and takes them
// out when it closes. The attachment is a BPF link that every process
// holds a descriptor of, so the program stays on the interface while any
// of them lives, and the kernel detaches it when the last one goes.
//
// No file system is needed: ranks started in mount namespaces of their
// own (nethost's hosts, containers) see no common bpffs to pin in.

// xdpShared is this process's hold on the program of one interface.
type xdpShared struct {
	key    sharedKey
	obj    *xdpObjects
	attach string            // "driver" or "generic"
	held   link.Link         // the attachment, when this process made it
	heldFD int               // a descriptor of another process's attachment, or -1
	ln     *net.UnixListener // serving the others, when this process loaded the program
	refs   int
}

// sharedKey names an interface: its network namespace and index.
type sharedKey struct {
	netns   uint64
	ifindex int
}

// sharedPrograms is every interface this process holds a program of.
var sharedPrograms struct {
	sync.Mutex
	m map[sharedKey]*xdpShared
}

// shareName is the abstract socket name of the process that loaded the
// program of interface ifindex, which also serves as the lock on loading
// it; holderName is this process's, which serves it too once it holds
// it, so that the program can be had as long as any holder lives.
func shareName(ifindex int) string { return "@tachyon/xdp/" + strconv.Itoa(ifindex) }

func holderName(ifindex int) string {
	return shareName(ifindex) + "/" + strconv.Itoa(os.Getpid())
}

// servers lists the names that may serve ifindex's program in this
// thread's network namespace: the loader's, then every holder's that
// /proc/thread-self/net/unix shows.
func servers(ifindex int) []string {
	names := []string{shareName(ifindex)}
	b, err := os.ReadFile("/proc/thread-self/net/unix")
	if err != nil {
		return names
	}
	prefix := shareName(ifindex) + "/"
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 8 && strings.HasPrefix(f[7], prefix) {
			names = append(names, f[7])
		}
	}
	return names
}

// fds returns the descriptors a server sends, in the order of share*.
func (s *xdpShared) fds() []int {
	fds := []int{s.obj.prog.FD(), s.heldFD}
	if h, ok := s.held.(interface{ FD() int }); ok {
		fds[shareAttach] = h.FD()
	}
	for _, m := range s.obj.maps() {
		fds = append(fds, (*m).FD())
	}
	return fds
}

// threadNetns identifies the network namespace of the calling thread.
func threadNetns() (uint64, error) {
	var st unix.Stat_t
	if err := unix.Stat("/proc/thread-self/ns/net", &st); err != nil {
		return 0, err
	}
	return st.Ino, nil
}

// acquireXDP returns the program of ifc, which has queues receive queues:
// the one this process holds already, another process's, or a new one
// this process loads, attaches and serves. Its errors wrap ErrNoPrivilege,
// ErrNoXSK or ErrRefused. The caller must call release once it is done.
func acquireXDP(ifc *net.Interface, queues int) (*xdpShared, error) {
	ns, err := threadNetns()
	if err != nil {
		return nil, fmt.Errorf("%w: reading this thread's network namespace: %v", ErrInterface, err)
	}
	key := sharedKey{ns, ifc.Index}
	sharedPrograms.Lock()
	defer sharedPrograms.Unlock()
	if s := sharedPrograms.m[key]; s != nil {
		s.refs++
		return s, nil
	}
	var s *xdpShared
	for try := 0; s == nil && try < 4; try++ {
		for _, name := range servers(key.ifindex) {
			if s, err = dialXDP(key, name); err == nil {
				break
			}
		}
		if s != nil {
			break
		}
		// Nobody serves: load the program and serve it ourselves; if
		// another process took the loader's name first, ask again.
		if s, err = serveXDP(key, ifc, queues); err == nil || !errors.Is(err, unix.EADDRINUSE) {
			break
		}
	}
	if err != nil {
		return nil, err
	}
	if s.ln == nil {
		// Serve it too, so that links opened after the loader has gone
		// still find it (best effort: a link of this process needs none).
		if ln, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: holderName(key.ifindex), Net: "unixpacket"}); err == nil {
			s.ln = ln
			go serveShared(ln, s.fds(), s.attach)
		}
	}
	if sharedPrograms.m == nil {
		sharedPrograms.m = make(map[sharedKey]*xdpShared)
	}
	sharedPrograms.m[key] = s
	return s, nil
}

// release drops a hold that acquireXDP gave; the last closes the process's
// descriptors, and, in the process that serves, stops serving.
func (s *xdpShared) release() error {
	sharedPrograms.Lock()
	defer sharedPrograms.Unlock()
	if s.refs--; s.refs > 0 {
		return nil
	}
	delete(sharedPrograms.m, s.key)
	var errs []error
	if s.ln != nil {
		errs = append(errs, s.ln.Close())
	}
	if s.held != nil {
		errs = append(errs, s.held.Close())
	}
	if s.heldFD >= 0 {
		errs = append(errs, unix.Close(s.heldFD))
	}
	errs = append(errs, s.obj.Close())
	return errors.Join(errs...)
}

// The descriptors a server sends, in this order: the program, its
// attachment, and its maps in xdpObjects.maps's order.
const (
	shareProg   = 0
	shareAttach = 1
	shareMaps   = 2
	shareFDs    = shareMaps + 7
)

// dialXDP asks the process that serves key's program under name for it;
// it fails with ECONNREFUSED where none serves.
func dialXDP(key sharedKey, name string) (*xdpShared, error) {
	c, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: name, Net: "unixpacket"})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	buf := make([]byte, 16)
	oob := make([]byte, unix.CmsgSpace(4*shareFDs))
	n, oobn, _, _, err := c.ReadMsgUnix(buf, oob)
	if err != nil {
		return nil, fmt.Errorf("%w: receiving the XDP program of interface %d: %v", ErrRefused, key.ifindex, err)
	}
	var fds []int
	if msgs, err := unix.ParseSocketControlMessage(oob[:oobn]); err == nil {
		for _, m := range msgs {
			if f, err := unix.ParseUnixRights(&m); err == nil {
				fds = append(fds, f...)
			}
		}
	}
	closeAll := func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}
	if len(fds) != shareFDs || n == 0 {
		closeAll()
		return nil, fmt.Errorf("%w: the process serving the XDP program of interface %d sent %d descriptors", ErrRefused, key.ifindex, len(fds))
	}
	s := &xdpShared{key: key, obj: &xdpObjects{}, attach: string(buf[:n]), heldFD: fds[shareAttach], refs: 1}
	used := make([]bool, shareFDs) // descriptors an object owns now
	used[shareAttach] = true
	fail := func(err error) (*xdpShared, error) {
		for i, fd := range fds {
			if !used[i] {
				unix.Close(fd)
			}
		}
		s.obj.Close()
		unix.Close(s.heldFD)
		return nil, fmt.Errorf("%w: the XDP program of interface %d: %v", ErrRefused, key.ifindex, err)
	}
	if s.obj.prog, err = ebpf.NewProgramFromFD(fds[shareProg]); err != nil {
		return fail(err)
	}
	used[shareProg] = true
	for i, m := range s.obj.maps() {
		if *m, err = ebpf.NewMapFromFD(fds[shareMaps+i]); err != nil {
			return fail(err)
		}
		used[shareMaps+i] = true
	}
	if err := s.obj.mapPending(); err != nil {
		return fail(err)
	}
	return s, nil
}

// serveXDP loads ifc's program, attaches it and serves it to the other
// links of the host under key's name. It fails with EADDRINUSE where
// another process took the name first.
func serveXDP(key sharedKey, ifc *net.Interface, queues int) (*xdpShared, error) {
	ln, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: shareName(key.ifindex), Net: "unixpacket"})
	if err != nil {
		if errors.Is(err, unix.EADDRINUSE) {
			return nil, unix.EADDRINUSE
		}
		return nil, fmt.Errorf("%w: serving the XDP program of %s: %v", ErrRefused, ifc.Name, err)
	}
	s := &xdpShared{key: key, heldFD: -1, ln: ln, refs: 1}
	if s.obj, err = newXDPObjects(queues); err != nil {
		ln.Close()
		return nil, classifyBPF(err)
	}
	if s.held, s.attach, err = attachXDP(s.obj, ifc); err != nil {
		ln.Close()
		s.obj.Close()
		return nil, err
	}
	go serveShared(ln, s.fds(), s.attach)
	return s, nil
}

// serveShared answers every connection to ln with the program's
// descriptors until ln closes, to processes of this user or root only:
// an abstract socket has no permissions of its own, and the maps steer
// every link's frames. Without a BPF link (a kernel before 5.9 attaches
// by netlink) it sends none: the others then fall back.
func serveShared(ln *net.UnixListener, fds []int, attach string) {
	for {
		c, err := ln.AcceptUnix()
		if err != nil {
			return
		}
		if !sameUser(c) {
			slog.Warn("nic: a process of another user asked for the XDP program; refused")
		} else if fds[shareAttach] >= 0 {
			if _, _, err := c.WriteMsgUnix([]byte(attach), unix.UnixRights(fds...), nil); err != nil {
				slog.Debug("nic: sending the XDP program to another link failed", "err", err)
			}
		}
		c.Close()
	}
}

// sameUser reports whether the process at the other end of c runs as
// this process's effective user, or as root.
func sameUser(c *net.UnixConn) bool {
	rc, err := c.SyscallConn()
	if err != nil {
		return false
	}
	var cred *unix.Ucred
	rc.Control(func(fd uintptr) {
		cred, err = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	})
	return err == nil && cred != nil && (cred.Uid == 0 || int(cred.Uid) == os.Geteuid())
}

// attachXDP attaches obj's program to ifc: in the driver first, in the
// generic hook if the driver refuses (as nic_xdp_attach says), retrying
// EBUSY for nic_rebind_wait (as after a program's last holder closed)
// once, not in each hook. A driver that refuses the plain program for
// the interface's MTU (a frame over one buffer: veth's ERANGE, others'
// EINVAL or EOPNOTSUPP) is offered the frags-aware one. It returns the
// attachment and its hook.
func attachXDP(obj *xdpObjects, ifc *net.Interface) (link.Link, string, error) {
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
		attach := func() error {
			return retryBusy(func() (err error) {
				a, err = link.AttachXDP(link.XDPOptions{Program: obj.prog, Interface: ifc.Index, Flags: m.flags})
				return err
			})
		}
		if obj.frags && m.flags != link.XDPDriverMode {
			// The generic hook after a frags-aware try in the driver's.
			if err := obj.loadProgram(false); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		err := attach()
		if err != nil && m.flags == link.XDPDriverMode && !obj.frags && ifc.MTU > 1500 &&
			(errors.Is(err, unix.ERANGE) || errors.Is(err, unix.EINVAL) || errors.Is(err, unix.EOPNOTSUPP)) {
			if lerr := obj.loadProgram(true); lerr == nil {
				if err = attach(); err != nil {
					err = fmt.Errorf("frags-aware too: %w", err)
				}
			}
		}
		if err == nil {
			return a, m.name, nil
		}
		if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) {
			return nil, "", fmt.Errorf("%w: attaching the XDP program to %s: %v", ErrNoPrivilege, ifc.Name, err)
		}
		errs = append(errs, fmt.Errorf("%s mode: %w", m.name, err))
		if errors.Is(err, unix.EBUSY) {
			break // a program holds the interface, in either hook: waited once
		}
	}
	return nil, "", fmt.Errorf("%w: attaching the XDP program to %s (another program may hold it): %w", ErrRefused, ifc.Name, errors.Join(errs...))
}
