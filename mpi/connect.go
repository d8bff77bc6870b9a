package mpi

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tachyon-hpc/tachyon/cvar"
	"github.com/tachyon-hpc/tachyon/engine"
)

// Connections between processes started apart (MPI-4.1 section 11.8).
// Two groups of processes, each an intracommunicator with a root, meet
// through a TCP connection between their roots: the accepting side's
// root took it on an address (a Listener's, or an OpenPort port), the
// connecting side's root dialed it.
//
//  1. Hello: the connecting root sends its group's size, the accepting
//     root answers with its own (or refuses). Each root tells its group.
//  2. The world of the connection: the accepting group's ranks are its
//     ranks 0..n-1, the connecting group's n..n+m-1. It is made as a
//     launched job's world is (joinJob): the two roots carry its
//     key-value space between them (connExchange), each for its group.
//     The data then goes by the best transport each pair shares: shared
//     memory within a host, the network across hosts.
//  3. Each side gets an intercommunicator of its group and the other
//     (context pair 2 of the connection's world).
//  4. The roots keep the TCP connection open while the connection
//     lives: when the other root's process ends, the kernel closes its
//     end, and the operations that need it fail (engine's FailPeer) at
//     once instead of after a network timeout.
//
// Listen and Dial are the same between two processes alone.

var (
	connectTimeout = cvar.NewDuration("mpi_connect_timeout", 10*time.Second,
		"Longest a listener (Session.Listen) gives a client to finish the handshake that makes a connection: a client that connects and stalls is dropped after it. Dial, Accept and Connect are bounded by their context instead.",
		cvar.WithCategory("mpi"), cvar.WithRange(int64(time.Millisecond), int64(time.Hour)))
	disconnectTimeout = cvar.NewDuration("mpi_disconnect_timeout", 10*time.Second,
		"Longest Finalize and Disconnect wait for a connection's sends to be delivered (a receiver that is alive but does not receive holds them) before they close it with sends pending. Session.Close and DisconnectContext are bounded by their context instead.",
		cvar.WithCategory("mpi"), cvar.WithRange(0, int64(time.Hour)))
)

// Handshake frames: a length (u32, little-endian) and that many bytes of
// text, lines of key=value under a first line naming the frame.
const (
	helloLine   = "tachyon-connect 1"
	welcomeLine = "tachyon-accept 1"
	refuseLine  = "tachyon-refuse 1"
	roundLine   = "tachyon-round 1"
	maxFrame    = 1 << 20
	joinRounds  = 3 // the barriers of joinJob
)

// conn is one connection's world, held by its session until
// disconnected.
type conn struct {
	s       *Session
	p       *proc
	ctl     net.Conn // the roots' TCP connection; nil on other ranks
	other   int      // the other root's rank in the connection's world
	done    chan struct{}
	closing atomic.Bool // Disconnect has begun: the end of ctl is this side's doing
	once    sync.Once
	err     error
}

// PortPrefix starts the names of ports (OpenPort) and may start the
// address given to Dial and Connect.
const PortPrefix = "tachyon://"

// portAddr returns the TCP address a port name or address names.
func portAddr(op, port string) (string, error) {
	addr := strings.TrimPrefix(port, PortPrefix)
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return "", errorf(ErrPort, op, "%q is neither an address (host:port) nor a port name (%shost:port): %v", port, PortPrefix, err)
	}
	return addr, nil
}

// Listener takes connections from processes that Dial its address: one
// intercommunicator per client. Its methods are safe for concurrent use.
type Listener struct {
	s     *Session
	ln    net.Listener
	ready chan *Comm // connections made, waiting for Accept
	done  chan struct{}
	once  sync.Once
}

// Listen starts taking connections on addr, a TCP address ("host:port";
// ":0" for a port the kernel picks): each client that Dials it becomes,
// once their handshake has made the connection, an intercommunicator
// that Accept returns. Handshakes run in the background, each bounded by
// mpi_connect_timeout; one that fails is logged (WithLogger) and
// dropped, and the listener goes on.
func (s *Session) Listen(addr string) (*Listener, error) {
	if intercepted() {
		c := sessionCall(OpListen, s)
		c.Port = addr
		r, err := c.runResult()
		return r.Listener, err
	}
	return s.pListen(addr)
}

// pListen is Listen without interception.
func (s *Session) pListen(addr string) (*Listener, error) {
	const op = "Listen"
	if err := s.check(op); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", strings.TrimPrefix(addr, PortPrefix))
	if err != nil {
		return nil, noComm(&Error{Class: ErrPort, Op: op, Detail: "listening on " + addr, Err: err})
	}
	l := &Listener{s: s, ln: ln, ready: make(chan *Comm), done: make(chan struct{})}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		ln.Close()
		return nil, noComm(errorf(ErrSession, op, "session %s is closed", s.cfg.name))
	}
	s.lns[l] = struct{}{}
	s.pending.Add(1)
	s.mu.Unlock()
	go l.loop()
	return l, nil
}

// Addr returns the address the listener takes connections on.
func (l *Listener) Addr() net.Addr { return l.ln.Addr() }

// loop takes TCP connections and makes each a connection in a goroutine
// of its own.
func (l *Listener) loop() {
	defer l.s.pending.Done()
	for {
		tc, err := l.ln.Accept()
		if err != nil {
			select {
			case <-l.done:
				return
			default:
			}
			l.s.cfg.logger.Warn("tachyon: listener: accepting", "addr", l.ln.Addr().String(), "err", err)
			time.Sleep(10 * time.Millisecond) // out of descriptors, say: not a spin
			continue
		}
		l.s.pending.Add(1)
		go l.handshake(tc)
	}
}

// handshake makes the connection of a client that connected, and hands
// it to Accept.
func (l *Listener) handshake(tc net.Conn) {
	defer l.s.pending.Done()
	ctx, cancel := context.WithTimeout(context.Background(), connectTimeout.Get())
	defer cancel()
	go func() { // Close abandons the handshake
		select {
		case <-l.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	c, err := l.s.connect(ctx, l.s.world.self, 0, tc, true, "Accept")
	if err != nil {
		l.s.cfg.logger.Warn("tachyon: listener: a client's handshake failed", "addr", l.ln.Addr().String(), "client", tc.RemoteAddr().String(), "err", err)
		return
	}
	select {
	case l.ready <- c:
	case <-l.done:
		c.p.conn.close(context.Background())
	}
}

// Accept waits for the next client's connection and returns it: an
// intercommunicator whose remote group is the client (rank 0), whose
// local group is this process. It returns an error matching ErrCanceled
// and ctx's error if ctx ends first, and ErrPort (and net.ErrClosed) once
// the listener is closed.
func (l *Listener) Accept(ctx context.Context) (*Comm, error) {
	if intercepted() {
		c := listenerCall(OpListenerAccept, l)
		c.Ctx = ctx
		return c.runComm()
	}
	return l.pAccept(ctx)
}

// pAccept is Accept without interception.
func (l *Listener) pAccept(ctx context.Context) (*Comm, error) {
	const op = "Accept"
	select {
	case c := <-l.ready:
		return c, nil
	case <-l.done:
		return nil, noComm(&Error{Class: ErrPort, Op: op, Detail: "the listener on " + l.ln.Addr().String() + " is closed", Err: net.ErrClosed})
	case <-ctx.Done():
		return nil, noComm(ctxError(op, ctx.Err()))
	}
}

// Close stops taking connections: Accept returns ErrPort, handshakes
// under way are abandoned. Connections Accept returned stay.
func (l *Listener) Close() error {
	if intercepted() {
		return listenerCall(OpListenerClose, l).run()
	}
	return l.pClose()
}

// pClose is Close without interception.
func (l *Listener) pClose() error {
	l.once.Do(func() {
		close(l.done)
		l.ln.Close()
		l.s.mu.Lock()
		delete(l.s.lns, l)
		l.s.mu.Unlock()
	})
	return nil
}

// Dial connects to the process listening at addr (a Listener's address,
// "host:port", or a port name, "tachyon://host:port") and returns the
// connection: an intercommunicator whose remote group is the listener's
// process (rank 0), whose local group is this process. ctx bounds the
// whole handshake.
func (s *Session) Dial(ctx context.Context, addr string) (*Comm, error) {
	if intercepted() {
		c := sessionCall(OpDial, s)
		c.Port, c.Ctx = addr, ctx
		return c.runComm()
	}
	return s.pDial(ctx, addr)
}

// pDial is Dial without interception.
func (s *Session) pDial(ctx context.Context, addr string) (*Comm, error) {
	const op = "Dial"
	if err := s.check(op); err != nil {
		return nil, err
	}
	a, err := portAddr(op, addr)
	if err != nil {
		return nil, noComm(err)
	}
	tc, err := new(net.Dialer).DialContext(ctx, "tcp", a)
	if err != nil {
		if e := ctxEnded(ctx, err); e != nil {
			return nil, noComm(ctxError(op, e))
		}
		return nil, noComm(&Error{Class: ErrPort, Op: op, Detail: "connecting to " + addr, Err: err})
	}
	return s.connect(ctx, s.world.self, 0, tc, false, op)
}

// ctxError is the error of a routine whose context ended first.
func ctxError(op string, err error) *Error {
	return &Error{Class: ErrCanceled, Op: op, Detail: "the context ended first", Err: err}
}

// connect makes the connection between local's group, whose root is
// root, and the group at the other end of tc (the TCP connection, on
// root; nil elsewhere), accepting or connecting, and returns this side's
// intercommunicator. It is collective over local. ctx bounds the TCP
// side of the handshake.
func (s *Session) connect(ctx context.Context, local *Comm, root int, tc net.Conn, accepting bool, op string) (*Comm, error) {
	me := local.rank == root
	var dl *ctxDeadline
	if me {
		dl = bindDeadline(ctx, tc.SetDeadline)
	}
	fail := func(detail string, err error) (*Comm, error) {
		ended := false
		if me {
			dl.release()
			tc.Close()
			if e := ctxEnded(ctx, err); e != nil {
				ended = true
				if !errors.Is(err, e) {
					err = errors.Join(e, err)
				}
			}
		}
		var e *Error
		if errors.As(err, &e) && e.Op == op {
			return nil, err
		}
		cls := ErrOther
		switch {
		case ended:
			cls = ErrCanceled
		case errors.Is(err, engine.ErrPeerDead), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
			cls = ErrProcFailed
		}
		return nil, &Error{Class: cls, Op: op, Detail: detail, Err: err}
	}

	// 1. Hello: the sizes of both groups.
	n, m := local.size, 0
	var sizes []byte
	if me {
		var err error
		if n, m, err = hello(tc, accepting, local.size); err != nil {
			sizes = failPayload(err)
		} else {
			sizes = []byte(fmt.Sprintf("ok\nn=%d\nm=%d\npeer=%s\n", n, m, tc.RemoteAddr()))
		}
	}
	sizes, err := local.bcastBytes(op, root, sizes)
	if err != nil {
		return fail("telling the group the other group's size", err)
	}
	kv, err := parsePayload(sizes)
	if err == nil {
		n, err = strconv.Atoi(kv["n"])
	}
	if err == nil {
		m, err = strconv.Atoi(kv["m"])
	}
	if err != nil {
		return fail("the handshake's hello", err)
	}

	// 2. The connection's world.
	base := 0
	if !accepting {
		base = n
	}
	x := &connExchange{local: local, root: root, tc: tc, accepting: accepting, rank: base + local.rank, size: n + m, op: op,
		puts: map[string]string{}, all: map[string]string{}}
	p, err := joinJob(x, s.joinOptions(), op, fmt.Sprintf("rank %d of %d of the connection", x.rank, x.size))
	if err != nil {
		x.abandon(err)
		return fail("making the connection's world", err)
	}
	if x.round != joinRounds {
		p.release()
		return fail("making the connection's world", fmt.Errorf("joinJob made %d exchanges, the connection %d", x.round, joinRounds))
	}
	p.skew = connSkew
	if err := s.adopt(p, op, kv["peer"]); err != nil {
		p.release()
		return fail("setting the connection's endpoint up", err)
	}

	// 3. The intercommunicator.
	acc, con := make([]int, n), make([]int, m)
	for i := range acc {
		acc[i] = i
	}
	for i := range con {
		con[i] = n + i
	}
	mine, theirs := acc, con
	if !accepting {
		mine, theirs = con, acc
	}
	const pair = firstFreeCtx
	p.nextCtx = pair + 1
	c := newInterComm(p, newGroup(mine, p.ep.Rank()), newGroup(theirs, p.ep.Rank()), pair)
	c.errh.Store(local.errh.Load())
	k := &conn{s: s, p: p, done: make(chan struct{})}
	p.conn = k

	// 4. The roots' watch.
	if me {
		dl.release()
		k.ctl, k.other = tc, n // the accepting root is 0, the connecting root n
		if !accepting {
			k.other = 0
		}
		go k.watch()
	} else {
		close(k.done)
	}
	if err := s.add(k); err != nil {
		k.close(context.Background())
		return nil, err
	}
	return c, nil
}

// hello is the handshake's first exchange, on a root: it returns the
// accepting group's size n and the connecting group's m.
func hello(tc net.Conn, accepting bool, size int) (n, m int, err error) {
	if !accepting {
		if err := writeFrame(tc, fmt.Sprintf("%s\nsize=%d\n", helloLine, size)); err != nil {
			return 0, 0, err
		}
		head, kv, err := readFrame(tc)
		if err != nil {
			return 0, 0, err
		}
		switch head {
		case welcomeLine:
		case refuseLine:
			return 0, 0, fmt.Errorf("the accepting side refused: %s", kv["reason"])
		default:
			return 0, 0, fmt.Errorf("the other side answered %q, not a Tachyon handshake", head)
		}
		n, err := strconv.Atoi(kv["size"])
		if err != nil || n < 1 {
			return 0, 0, fmt.Errorf("the accepting side gave a group size of %q", kv["size"])
		}
		return n, size, nil
	}
	head, kv, err := readFrame(tc)
	if err != nil {
		return 0, 0, err
	}
	if head != helloLine {
		writeFrame(tc, refuseLine+"\nreason=not a Tachyon handshake (or another version)\n")
		return 0, 0, fmt.Errorf("the client sent %q, not a Tachyon handshake (or another version)", head)
	}
	m, err = strconv.Atoi(kv["size"])
	if err != nil || m < 1 || m > 1<<20 {
		writeFrame(tc, refuseLine+"\nreason=a malformed group size\n")
		return 0, 0, fmt.Errorf("the client gave a group size of %q", kv["size"])
	}
	if err := writeFrame(tc, fmt.Sprintf("%s\nsize=%d\n", welcomeLine, size)); err != nil {
		return 0, 0, err
	}
	return size, m, nil
}

// watch waits on a root's TCP connection: its end (the other root's
// process ended, or its connection was disconnected) fails what needs
// the other root.
func (k *conn) watch() {
	defer close(k.done)
	var b [1]byte
	_, err := k.ctl.Read(b[:])
	if k.closing.Load() {
		return // this side's Disconnect
	}
	if err == nil {
		err = errors.New("the other side sent data after the handshake")
	}
	k.s.cfg.logger.Info("tachyon: a connection's other side went away", "peer", k.ctl.RemoteAddr().String(), "err", err)
	k.p.ep.FailPeer(k.other, fmt.Errorf("the connection's other side went away: %w", err))
}

// close disconnects: it delivers what was sent while ctx lasts, then
// closes the connection's world and the roots' TCP connection, and the
// session forgets it. Only the first call acts; later ones return its
// result.
func (k *conn) close(ctx context.Context) error {
	k.once.Do(func() {
		k.err = k.p.close(ctx)
		k.closing.Store(true)
		if k.ctl != nil {
			k.ctl.Close()
		}
		<-k.done
		k.s.remove(k)
	})
	return k.err
}

// connExchange is the key-value space of a connection's world being
// made: each rank's puts go to its group's root, the roots swap their
// groups' over TCP (the accepting root writes first), and each root
// hands its group the whole.
type connExchange struct {
	local     *Comm
	root      int
	tc        net.Conn
	accepting bool
	rank      int
	size      int
	op        string
	round     int
	puts      map[string]string // this rank's, since the last Barrier
	all       map[string]string // everything published
	failed    error             // this rank's failure, sent at the next barrier
}

func (x *connExchange) Rank() int { return x.rank }
func (x *connExchange) Size() int { return x.size }

func (x *connExchange) Put(key, value string) error {
	if strings.ContainsAny(key, "=\n") || strings.Contains(value, "\n") {
		return fmt.Errorf("malformed key %q or value %q", key, value)
	}
	x.puts[key] = value
	return nil
}

func (x *connExchange) Get(key string) (string, error) {
	v, ok := x.all[key]
	if !ok {
		return "", fmt.Errorf("nothing published under %q", key)
	}
	return v, nil
}

// Allgather puts value under key-RANK and returns every rank's after the
// Barrier that publishes them: one round, the roots carrying the whole
// space to every rank.
func (x *connExchange) Allgather(key, value string) ([]string, error) {
	if err := x.Put(key+"-"+strconv.Itoa(x.rank), value); err != nil {
		return nil, err
	}
	if err := x.Barrier(); err != nil {
		return nil, err
	}
	vals := make([]string, x.size)
	for r := range vals {
		v, err := x.Get(key + "-" + strconv.Itoa(r))
		if err != nil {
			return nil, err
		}
		vals[r] = v
	}
	return vals, nil
}

// Barrier publishes what every rank of both groups put since the last.
func (x *connExchange) Barrier() error {
	x.round++
	var mine []byte
	if x.failed != nil {
		mine = failPayload(x.failed)
	} else {
		mine = okPayload(x.puts)
	}
	x.puts = map[string]string{}
	parts, err := x.local.gatherBytes(x.op, x.root, mine)
	if err != nil {
		return err
	}
	var whole []byte
	if x.local.rank == x.root {
		whole = x.swap(parts)
	}
	if whole, err = x.local.bcastBytes(x.op, x.root, whole); err != nil {
		return err
	}
	kv, err := parsePayload(whole)
	if err != nil {
		return err
	}
	for k, v := range kv {
		x.all[k] = v
	}
	return nil
}

// swap is a root's part of a barrier: its group's puts, parts, merged
// and swapped for the other group's; it returns the payload for its
// group (a failure, if any rank of either group failed, or the TCP
// connection did).
func (x *connExchange) swap(parts [][]byte) []byte {
	merged := map[string]string{}
	var failed error
	for _, b := range parts {
		kv, err := parsePayload(b)
		if err != nil {
			failed = errors.Join(failed, err)
			continue
		}
		for k, v := range kv {
			merged[k] = v
		}
	}
	out := okPayload(merged)
	if failed != nil {
		out = failPayload(failed)
	}
	frame := fmt.Sprintf("%s\nround=%d\n%s", roundLine, x.round, out)
	var theirs map[string]string
	var err error
	if x.accepting {
		if err = writeFrame(x.tc, frame); err == nil {
			theirs, err = x.readRound()
		}
	} else if theirs, err = x.readRound(); err == nil {
		err = writeFrame(x.tc, frame)
	}
	if err == nil && failed == nil {
		for k, v := range theirs {
			merged[k] = v
		}
		return okPayload(merged)
	}
	return failPayload(errors.Join(failed, err))
}

// readRound reads the other root's frame of this round: its group's
// puts, or the failure it reports.
func (x *connExchange) readRound() (map[string]string, error) {
	b, err := readFrameBytes(x.tc)
	if err != nil {
		return nil, err
	}
	want := fmt.Sprintf("%s\nround=%d\n", roundLine, x.round)
	rest, ok := strings.CutPrefix(string(b), want)
	if !ok {
		return nil, fmt.Errorf("the other side sent a frame out of the handshake's round %d", x.round)
	}
	kv, err := parsePayload([]byte(rest))
	if err != nil {
		return nil, fmt.Errorf("the other side failed: %w", err)
	}
	return kv, nil
}

// abandon takes part in the rounds left after this rank failed, so that
// the others of its group, waiting on its root, fail too instead of
// waiting.
func (x *connExchange) abandon(err error) {
	x.failed = err
	for x.round < joinRounds {
		x.Barrier() // fails, as it should: every rank of the group sees the failure
	}
}

// okPayload and failPayload encode what a barrier carries.
func okPayload(kv map[string]string) []byte {
	var b strings.Builder
	b.WriteString("ok\n")
	for k, v := range kv {
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(v)
		b.WriteByte('\n')
	}
	return []byte(b.String())
}

func failPayload(err error) []byte {
	return []byte("fail=" + strings.ReplaceAll(err.Error(), "\n", "; ") + "\n")
}

// parsePayload decodes okPayload, or returns failPayload's error.
func parsePayload(b []byte) (map[string]string, error) {
	s := string(b)
	if msg, ok := strings.CutPrefix(s, "fail="); ok {
		return nil, errors.New(strings.TrimSuffix(msg, "\n"))
	}
	body, ok := strings.CutPrefix(s, "ok\n")
	if !ok {
		return nil, fmt.Errorf("a malformed handshake payload (%d bytes)", len(b))
	}
	kv := map[string]string{}
	for _, line := range strings.Split(body, "\n") {
		if line == "" {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return nil, fmt.Errorf("a malformed handshake line %q", line)
		}
		kv[k] = v
	}
	return kv, nil
}

// writeFrame writes one handshake frame.
func writeFrame(w io.Writer, text string) error {
	if len(text) > maxFrame {
		return fmt.Errorf("a handshake frame of %d bytes (at most %d)", len(text), maxFrame)
	}
	b := make([]byte, 4+len(text))
	binary.LittleEndian.PutUint32(b, uint32(len(text)))
	copy(b[4:], text)
	_, err := w.Write(b)
	return err
}

// readFrameBytes reads one handshake frame's bytes.
func readFrameBytes(r io.Reader) ([]byte, error) {
	var h [4]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return nil, err
	}
	n := binary.LittleEndian.Uint32(h[:])
	if n > maxFrame {
		return nil, fmt.Errorf("a handshake frame of %d bytes (at most %d): not a Tachyon peer", n, maxFrame)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, err
	}
	return b, nil
}

// readFrame reads one handshake frame: its first line, and its
// key=value lines.
func readFrame(r io.Reader) (string, map[string]string, error) {
	b, err := readFrameBytes(r)
	if err != nil {
		return "", nil, err
	}
	head, rest, _ := strings.Cut(string(b), "\n")
	kv := map[string]string{}
	for _, line := range strings.Split(rest, "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			kv[k] = v
		}
	}
	return head, kv, nil
}

// Disconnect ends c's connection (MPI_COMM_DISCONNECT): it delivers what
// was sent on it, waiting at most mpi_disconnect_timeout, then closes the
// connection. Every communicator of the connection (c, its duplicates,
// Merge's) then returns ErrComm. It is local, not collective: operations
// of the other side that need this one fail with ErrProcFailed, as when a
// process ends. On a communicator that is no connection's it is Free.
func (c *Comm) Disconnect() error {
	if intercepted() {
		return newCall(OpDisconnect, c).run()
	}
	return c.pDisconnect()
}

// pDisconnect is Disconnect without interception.
func (c *Comm) pDisconnect() error {
	ctx, cancel := context.WithTimeout(context.Background(), disconnectTimeout.Get())
	defer cancel()
	return c.pDisconnectContext(ctx)
}

// DisconnectContext is Disconnect bounded by ctx instead of
// mpi_disconnect_timeout. It returns ctx's error (matching ErrCanceled
// too) if ctx ended with sends undelivered; the connection is closed all
// the same.
func (c *Comm) DisconnectContext(ctx context.Context) error {
	if intercepted() {
		call := newCall(OpDisconnect, c)
		call.Ctx = ctx
		return call.run()
	}
	return c.pDisconnectContext(ctx)
}

// pDisconnectContext is DisconnectContext without interception.
func (c *Comm) pDisconnectContext(ctx context.Context) error {
	const op = "Disconnect"
	if err := c.check(op); err != nil {
		return err
	}
	k := c.p.conn
	if k == nil {
		return c.pFree()
	}
	if err := k.close(ctx); err != nil {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return noComm(&Error{Class: ErrCanceled, Op: op, Detail: "sends were still undelivered when the context ended", Err: err})
		}
		return noComm(&Error{Class: ErrOther, Op: op, Detail: "closing the connection", Err: err})
	}
	return nil
}
