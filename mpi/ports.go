package mpi

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/tachyon-hpc/tachyon/cvar"
	"github.com/tachyon-hpc/tachyon/nic"
)

// Ports (MPI_OPEN_PORT): addresses on which a group of processes accepts
// connections collectively (Comm.Accept), where a Listener serves one
// process. A port is a TCP listener of this process, named
// "tachyon://host:port"; the name is what Comm.Connect and Dial take.

var portAddress = cvar.NewString("mpi_port_address", "",
	"TCP address OpenPort listens on (host:port). Empty: every address, on a port the kernel picks, the port named by the IPv4 address of the interface the network transport would use (nic_interface, else the default route's), else 127.0.0.1.",
	cvar.WithCategory("mpi"))

// The process's open ports, by name.
var ports struct {
	mu sync.Mutex
	m  map[string]net.Listener
}

// OpenPort opens a port on which Comm.Accept takes connections, and
// returns its name (MPI_OPEN_PORT), for Comm.Connect or Dial elsewhere:
// "tachyon://host:port" (mpi_port_address says where).
func OpenPort() (string, error) {
	if intercepted() {
		r, err := processCall(OpOpenPort).runResult()
		return r.Port, err
	}
	return pOpenPort()
}

// pOpenPort is OpenPort without interception.
func pOpenPort() (string, error) {
	const op = "OpenPort"
	addr := portAddress.Get()
	if addr == "" {
		addr = ":0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", noComm(&Error{Class: ErrPort, Op: op, Detail: "listening on " + addr, Err: err})
	}
	host, port, _ := net.SplitHostPort(ln.Addr().String())
	if ip, err := netip.ParseAddr(host); err != nil || ip.IsUnspecified() {
		host = advertisedHost()
	}
	name := PortPrefix + net.JoinHostPort(host, port)
	ports.mu.Lock()
	defer ports.mu.Unlock()
	if ports.m == nil {
		ports.m = map[string]net.Listener{}
	}
	ports.m[name] = ln
	return name, nil
}

// advertisedHost is the address a port listening on every address is
// named by: the network transport's interface's, else loopback's.
func advertisedHost() string {
	if ifc, err := nic.DefaultInterface(); err == nil {
		if i, err := net.InterfaceByName(ifc); err == nil {
			if addrs, err := i.Addrs(); err == nil {
				for _, a := range addrs {
					if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil {
						return n.IP.String()
					}
				}
			}
		}
	}
	return "127.0.0.1"
}

// ClosePort closes a port OpenPort opened (MPI_CLOSE_PORT): an Accept
// waiting on it returns ErrPort. Connections made through it stay.
func ClosePort(name string) error {
	if intercepted() {
		c := processCall(OpClosePort)
		c.Port = name
		return c.run()
	}
	return pClosePort(name)
}

// pClosePort is ClosePort without interception.
func pClosePort(name string) error {
	ports.mu.Lock()
	ln, ok := ports.m[name]
	delete(ports.m, name)
	ports.mu.Unlock()
	if !ok {
		return noComm(errorf(ErrPort, "ClosePort", "%q is not a port this process opened", name))
	}
	ln.Close()
	return nil
}

// Accept waits for a group to Connect to port and returns the connection
// (MPI_COMM_ACCEPT): an intercommunicator whose local group is c's,
// whose remote group is the connecting group. It is collective over c;
// port is used at root alone, and must be a port of root's process
// (OpenPort). The connection belongs to the session of c.
func (c *Comm) Accept(port string, root int) (*Comm, error) {
	if intercepted() {
		return c.connectCall(OpAccept, nil, port, root).runComm()
	}
	return c.pAcceptContext(context.Background(), port, root)
}

// AcceptContext is Accept whose wait and handshake at root end with ctx:
// then every rank of c returns an error (ErrCanceled at root, matching
// ctx's error too).
func (c *Comm) AcceptContext(ctx context.Context, port string, root int) (*Comm, error) {
	if intercepted() {
		return c.connectCall(OpAccept, ctx, port, root).runComm()
	}
	return c.pAcceptContext(ctx, port, root)
}

// connectCall returns the Call of Accept or Connect (op) on c.
func (c *Comm) connectCall(op Op, ctx context.Context, port string, root int) *Call {
	call := newCall(op, c)
	call.Ctx, call.Port, call.Peer = ctx, port, root
	return call
}

// pAcceptContext is AcceptContext without interception.
func (c *Comm) pAcceptContext(ctx context.Context, port string, root int) (*Comm, error) {
	const op = "Accept"
	if err := c.connectArgs(op, root); err != nil {
		return nil, err
	}
	var tc net.Conn
	var failed error
	if c.rank == root {
		ports.mu.Lock()
		ln, ok := ports.m[port]
		ports.mu.Unlock()
		if !ok {
			failed = errorf(ErrPort, op, "%q is not a port this process opened (OpenPort)", port)
		} else {
			tc, failed = acceptContext(ctx, ln)
			if failed != nil {
				if e := ctxEnded(ctx, failed); e != nil {
					failed = ctxError(op, e)
				} else {
					failed = &Error{Class: ErrPort, Op: op, Detail: "accepting on " + port, Err: failed}
				}
			}
		}
	}
	return c.connectGroup(ctx, root, tc, failed, true, op)
}

// acceptContext takes the next TCP connection on ln, or returns ctx's
// error.
func acceptContext(ctx context.Context, ln net.Listener) (net.Conn, error) {
	if tl, ok := ln.(*net.TCPListener); ok {
		defer bindDeadline(ctx, tl.SetDeadline).release()
	}
	c, err := ln.Accept()
	if e := ctxEnded(ctx, err); e != nil {
		return nil, e
	}
	return c, err
}

// ctxEnded returns ctx's error if err, a TCP call's, came of ctx's end
// (err may be that error already):
// ctx was canceled, or err is the timeout of ctx's deadline (which the
// call's deadline may see a moment before ctx does).
func ctxEnded(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if e := ctx.Err(); e != nil {
		return e
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return err
	}
	var ne net.Error
	if dl, ok := ctx.Deadline(); ok && errors.As(err, &ne) && ne.Timeout() && !time.Now().Before(dl) {
		return context.DeadlineExceeded
	}
	return nil
}

// ctxDeadline ties the deadline of a TCP connection or listener to a
// context until release: its blocking calls end when the context does.
type ctxDeadline struct {
	mu   sync.Mutex
	off  bool
	stop func() bool
	set  func(time.Time) error
}

// bindDeadline sets ctx's deadline with set, and one in the past when ctx
// is canceled.
func bindDeadline(ctx context.Context, set func(time.Time) error) *ctxDeadline {
	d := &ctxDeadline{set: set}
	if dl, ok := ctx.Deadline(); ok {
		set(dl)
	}
	d.stop = context.AfterFunc(ctx, func() {
		d.mu.Lock()
		if !d.off {
			set(time.Unix(1, 0))
		}
		d.mu.Unlock()
	})
	return d
}

// release clears the deadline; the context no longer touches it.
func (d *ctxDeadline) release() {
	d.stop()
	d.mu.Lock()
	d.off = true
	d.set(time.Time{})
	d.mu.Unlock()
}

// Connect connects c's group to the group accepting on port
// (MPI_COMM_CONNECT), and returns the connection: an intercommunicator
// whose local group is c's, whose remote group is the accepting group.
// It is collective over c; port, a port name or a Listener's address, is
// used at root alone. The connection belongs to the session of c.
func (c *Comm) Connect(port string, root int) (*Comm, error) {
	if intercepted() {
		return c.connectCall(OpConnect, nil, port, root).runComm()
	}
	return c.pConnectContext(context.Background(), port, root)
}

// ConnectContext is Connect whose dial and handshake at root end with
// ctx.
func (c *Comm) ConnectContext(ctx context.Context, port string, root int) (*Comm, error) {
	if intercepted() {
		return c.connectCall(OpConnect, ctx, port, root).runComm()
	}
	return c.pConnectContext(ctx, port, root)
}

// pConnectContext is ConnectContext without interception.
func (c *Comm) pConnectContext(ctx context.Context, port string, root int) (*Comm, error) {
	const op = "Connect"
	if err := c.connectArgs(op, root); err != nil {
		return nil, err
	}
	var tc net.Conn
	var failed error
	if c.rank == root {
		addr, err := portAddr(op, port)
		if err != nil {
			failed = err
		} else if tc, err = new(net.Dialer).DialContext(ctx, "tcp", addr); err != nil {
			if e := ctxEnded(ctx, err); e != nil {
				failed = ctxError(op, e)
			} else {
				failed = &Error{Class: ErrPort, Op: op, Detail: "connecting to " + port, Err: err}
			}
		}
	}
	return c.connectGroup(ctx, root, tc, failed, false, op)
}

// connectArgs checks Accept's and Connect's communicator and root.
func (c *Comm) connectArgs(op string, root int) error {
	if err := c.check(op); err != nil {
		return err
	}
	if c.IsInter() {
		return c.fail(errorf(ErrComm, op, "%s is an intercommunicator: connect an intracommunicator's group", c.label()))
	}
	if root < 0 || root >= c.size {
		return c.fail(errorf(ErrRank, op, "root %d is not a rank of a %d-rank communicator", root, c.size))
	}
	if c.p.sess == nil {
		return c.fail(errorf(ErrSession, op, "%s belongs to no session", c.label()))
	}
	return nil
}

// connectGroup is Accept and Connect once root has its TCP connection,
// or failed to get one: root tells the group, which fails alike.
func (c *Comm) connectGroup(ctx context.Context, root int, tc net.Conn, failed error, accepting bool, op string) (*Comm, error) {
	// Whether root got its connection, before the handshake: so that
	// the ranks do not wait on a root that has none.
	var word []byte
	if c.rank == root {
		word = okPayload(nil)
		if failed != nil {
			word = failPayload(failed)
		}
	}
	word, err := c.bcastBytes(op, root, word)
	if err == nil {
		_, err = parsePayload(word)
	}
	if err != nil {
		if tc != nil {
			tc.Close()
		}
		if failed != nil {
			return nil, c.fail(failed)
		}
		var e *Error
		if errors.As(err, &e) {
			return nil, c.fail(err)
		}
		return nil, c.fail(&Error{Class: ErrOther, Op: op, Detail: "root " + strconv.Itoa(root) + " could not get its connection", Err: err})
	}
	d, err := c.p.sess.connect(ctx, c, root, tc, accepting, op)
	return d, c.fail(err)
}
