package mpi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tachyon-hpc/tachyon/engine"
	"github.com/tachyon-hpc/tachyon/metrics/statshm"
	"github.com/tachyon-hpc/tachyon/nic"
	"github.com/tachyon-hpc/tachyon/pmi"
	"github.com/tachyon-hpc/tachyon/progress"
)

// Sessions (MPI-4.1 section 11.3) in Go's form. A Session is one
// instance of MPI in a process, with nothing global to the process: its
// own world, its own progress engines and counters, its own connections
// to processes started apart (Listen, Dial; Comm.Accept, Comm.Connect).
// A process may hold several at once, and make a new one after closing
// another. Init and Finalize are one session, the default one, which the
// package-level routines (World, Self, BufferAttach, ...) use.
//
// A session's world is the job the process was launched in (tachyonrun,
// a PMI launcher), joined as Init joins it, or this process alone: a
// service started on its own is a world of one, which finds its peers by
// address. A process joins its job once: one session holds it.

// Session is one instance of MPI in a process (MPI_Session). Its methods
// are safe for concurrent use.
type Session struct {
	cfg   sessionConfig
	id    uint64
	world *proc       // the session's world: the job, or this process alone
	pmi   *pmi.Client // the PMI launcher's connection when the world is its job
	def   bool        // the default session (Init's): it ends with Finalize
	inRun bool        // the session of a world of Run: it ends with Run

	pub *statshm.Publisher // its tachyonstat file (stat.go), nil if none

	mu      sync.Mutex
	closed  bool
	conns   map[*conn]struct{} // connections made and not yet disconnected
	lns     map[*Listener]struct{}
	pending sync.WaitGroup // listeners' accept loops and handshakes
}

// sessionIDs numbers the sessions of the process, from 1.
var sessionIDs atomic.Uint64

// sessionConfig is what SessionOptions set.
type sessionConfig struct {
	name        string
	thread      ThreadLevel
	standalone  bool
	logger      *slog.Logger
	progress    bool // a progress goroutine per endpoint (progress.Engine.Start)
	progressCPU int
	idle        []progress.Option
	net         engine.NetLinkConfig
	stat        *bool // nil: metrics_stat
}

// SessionOption configures a session. Options override the control
// variables that set the same thing (their TACHYON_* environment
// variables included) for that session alone.
type SessionOption func(*sessionConfig) error

// WithName names the session in its log records and its performance
// variables' labels. The default is "session-N", N counting the
// process's sessions from 1.
func WithName(name string) SessionOption {
	return func(c *sessionConfig) error {
		if name == "" {
			return errors.New("an empty session name")
		}
		c.name = name
		return nil
	}
}

// WithThreadLevel sets the thread support the session provides, as
// InitThread's argument does (the default is ThreadMultiple: any
// goroutine may call any routine at any time). Below ThreadMultiple no
// progress goroutine may run (WithProgressGoroutine).
func WithThreadLevel(l ThreadLevel) SessionOption {
	return func(c *sessionConfig) error {
		if l < ThreadSingle || l > ThreadMultiple {
			return fmt.Errorf("thread level %v is not one of ThreadSingle..ThreadMultiple", l)
		}
		c.thread = l
		return nil
	}
}

// WithStandalone makes the session's world this process alone, even in
// a process launched as a rank of a job (whose rank another session, or
// Init, may then hold).
func WithStandalone() SessionOption {
	return func(c *sessionConfig) error {
		c.standalone = true
		return nil
	}
}

// WithLogger sends the session's log records to l instead of
// slog.Default(): a connection's other side gone (Info), a listener's
// failed handshakes and a tachyonstat file that could not be made
// (Warn), and the error that ends the job under ErrorsAreFatal,
// ErrorsAbort or Abort (Error, just before the process exits). Each carries the attribute
// tachyon_session, the session's name. The library writes nothing to
// standard error itself.
func WithLogger(l *slog.Logger) SessionOption {
	return func(c *sessionConfig) error {
		if l == nil {
			return errors.New("a nil logger")
		}
		c.logger = l
		return nil
	}
}

// WithProgressGoroutine runs a progress goroutine on an OS thread of its
// own for each endpoint of the session (its world, and each connection),
// so that messages move while no goroutine calls into MPI, as
// progress.Engine.Start does; waiting goroutines then only watch their
// requests. cpu pins that thread to one CPU, -1 leaves it unpinned. Each
// such goroutine spins, then parks when idle (the session's idle
// settings): a thread per connection, for the few connections of a
// service.
func WithProgressGoroutine(cpu int) SessionOption {
	return func(c *sessionConfig) error {
		if cpu < -1 {
			return fmt.Errorf("CPU %d: want a CPU number or -1", cpu)
		}
		c.progress, c.progressCPU = true, cpu
		return nil
	}
}

// WithIdle sets how a goroutine waiting on the session backs off while
// there is nothing to do, for this session alone: it polls back to back
// for spin, then pauses between polls until pause more has passed, then
// parks for at most parkMax between looks (the control variables
// progress_spin, progress_pause and progress_park_max, docs/progress.md).
func WithIdle(spin, pause, parkMax time.Duration) SessionOption {
	return func(c *sessionConfig) error {
		if spin < 0 || pause < 0 || parkMax <= 0 {
			return fmt.Errorf("idle durations must be non-negative and park max positive (got %v, %v, %v)", spin, pause, parkMax)
		}
		c.idle = append(c.idle, progress.WithIdle(spin, pause, parkMax))
		return nil
	}
}

// IdleStrategy is what a goroutine waiting on the session does while
// there is nothing to do (progress.IdleStrategy, docs/progress.md).
type IdleStrategy int

// Idle strategies.
const (
	// IdlePark spins, then yields its P and thread now and then, then
	// parks: the default (the control variable progress_idle's).
	IdlePark IdleStrategy = iota
	// IdleYield spins, then yields for the rest of the wait, never
	// parking: no wake-up latency, at a CPU's cost.
	IdleYield
	// IdleSpin spins for the whole wait, holding its P and thread: the
	// least latency, for a goroutine that has a CPU to itself.
	IdleSpin
)

// WithIdleStrategy sets the session's idle strategy, over the control
// variable progress_idle.
func WithIdleStrategy(st IdleStrategy) SessionOption {
	return func(c *sessionConfig) error {
		var ps progress.IdleStrategy
		switch st {
		case IdlePark:
			ps = progress.IdlePark
		case IdleYield:
			ps = progress.IdleYield
		case IdleSpin:
			ps = progress.IdleSpin
		default:
			return fmt.Errorf("idle strategy %d is not IdlePark, IdleYield or IdleSpin", st)
		}
		c.idle = append(c.idle, progress.WithIdleStrategy(ps))
		return nil
	}
}

// NetMode says how connections across hosts reach the network: AF_XDP
// where it can be had (NetAuto), AF_XDP only (NetXDP), or the kernel's
// UDP (NetUDP).
type NetMode int

// Network modes (the control variable nic_mode's values).
const (
	NetAuto NetMode = iota
	NetXDP
	NetUDP
)

// WithNetwork sets the network interface ("": nic_interface, else the
// default route's) and mode through which the session's endpoints reach
// ranks on other hosts.
func WithNetwork(iface string, mode NetMode) SessionOption {
	return func(c *sessionConfig) error {
		switch mode {
		case NetAuto:
			c.net.Mode = nic.ModeAuto
		case NetXDP:
			c.net.Mode = nic.ModeXDP
		case NetUDP:
			c.net.Mode = nic.ModeUDP
		default:
			return fmt.Errorf("network mode %d is not NetAuto, NetXDP or NetUDP", mode)
		}
		c.net.Interface = iface
		return nil
	}
}

// WithStat says whether the session publishes its performance variables
// for tachyonstat while it is open: a file of shared memory, readable by
// its owner only, that names the session and holds its own endpoints'
// values (docs/tachyonstat.md). The default is the control variable
// metrics_stat's.
func WithStat(on bool) SessionOption {
	return func(c *sessionConfig) error {
		c.stat = &on
		return nil
	}
}

// NewSession starts a session (MPI_SESSION_INIT). In a process launched
// as a rank of a job, its world is that job, which it joins as Init
// does, unless WithStandalone; a process joins its job once, so a second
// session that asks for it fails. Otherwise its world is this process
// alone.
func NewSession(opts ...SessionOption) (*Session, error) {
	if intercepted() {
		c := processCall(OpNewSession)
		c.args = opts
		r, err := c.runResult()
		return r.Session, err
	}
	return pNewSession(opts)
}

// pNewSession is NewSession without interception.
func pNewSession(opts []SessionOption) (*Session, error) {
	cfg := defaultSessionConfig()
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return nil, errorf(ErrArg, "NewSession", "%v", err)
		}
	}
	return newSession(cfg, "NewSession")
}

func defaultSessionConfig() sessionConfig {
	return sessionConfig{thread: ThreadMultiple, progressCPU: -1}
}

// The launched job's rank, which one session of the process holds.
var job struct {
	mu     sync.Mutex
	joined bool
}

// newSession makes a session as cfg says, for routine op.
func newSession(cfg sessionConfig, op string) (*Session, error) {
	if cfg.progress && cfg.thread < ThreadMultiple {
		return nil, errorf(ErrArg, op, "a progress goroutine needs ThreadMultiple, not %v", cfg.thread)
	}
	s := &Session{cfg: cfg, id: sessionIDs.Add(1), conns: map[*conn]struct{}{}, lns: map[*Listener]struct{}{}}
	if s.cfg.name == "" {
		s.cfg.name = fmt.Sprintf("session-%d", s.id)
	}
	if s.cfg.logger == nil {
		s.cfg.logger = slog.Default()
	}
	s.cfg.logger = s.cfg.logger.With("tachyon_session", s.cfg.name)
	o := s.joinOptions()
	var p *proc
	if cfg.standalone || !Launched() {
		if !cfg.standalone {
			if err := unjoinable(); err != nil {
				return nil, err
			}
		}
		w, err := engine.NewWorld(1, o.progress...)
		if err != nil {
			return nil, &Error{Class: ErrSession, Op: op, Detail: "a world of this process alone", Err: err}
		}
		p = newProc(w.Endpoint(0), nil)
	} else {
		job.mu.Lock()
		defer job.mu.Unlock()
		if job.joined {
			return nil, errorf(ErrSession, op, "this process's rank of its job was joined by an earlier session (Init, or NewSession): a process joins its job once; pass WithStandalone for a world of this process alone")
		}
		var err error
		if p, s.pmi, err = bootstrap(o); err != nil {
			return nil, err
		}
		job.joined = true
		if p.skew, err = p.measureSkew(); err != nil {
			p.release()
			return nil, &Error{Class: ErrOther, Op: op, Detail: "measuring the ranks' clocks", Err: err}
		}
	}
	if err := s.adopt(p, op, peerWorld); err != nil {
		p.release()
		return nil, err
	}
	s.world = p
	s.startStat()
	return s, nil
}

// runSession returns the session of a world of Run: its ranks' own
// world, and the connections they make (Comm.Accept, Comm.Connect),
// which end with Run.
func runSession() *Session {
	s := &Session{cfg: defaultSessionConfig(), id: sessionIDs.Add(1), inRun: true, conns: map[*conn]struct{}{}, lns: map[*Listener]struct{}{}}
	s.cfg.name = fmt.Sprintf("run-%d", s.id)
	s.cfg.logger = slog.Default().With("tachyon_session", s.cfg.name)
	return s
}

// endRun disconnects what the ranks of Run left connected, once they
// have all returned.
func (s *Session) endRun() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), disconnectTimeout.Get())
	defer cancel()
	s.end(ctx, "Run")
}

// joinOptions is what the session sets for the endpoints it makes.
func (s *Session) joinOptions() joinOptions {
	return joinOptions{net: s.cfg.net, progress: s.cfg.idle}
}

// adopt makes p one of the session's procs, whose peer is peer (for its
// performance variables' labels): its thread level and its progress
// goroutine.
func (s *Session) adopt(p *proc, op, peer string) error {
	p.sess = s
	p.label(peer)
	p.thread = s.cfg.thread
	if s.cfg.thread < ThreadMultiple {
		err := p.ep.SetSerial(true)
		if err == nil {
			err = p.ep.Progress().SetSerial(true)
		}
		if err != nil {
			return &Error{Class: ErrOther, Op: op, Detail: "serial message path", Err: err}
		}
	}
	if s.cfg.progress {
		if err := p.ep.Progress().Start(s.cfg.progressCPU); err != nil {
			return &Error{Class: ErrOther, Op: op, Detail: "starting the progress goroutine", Err: err}
		}
	}
	return nil
}

// Name returns the session's name (WithName).
func (s *Session) Name() string { return s.cfg.name }

// World returns the communicator of the session's world: its job's
// ranks, or this process alone (the process set "mpi://WORLD").
func (s *Session) World() *Comm { return s.world.world }

// Self returns the communicator of this process alone in the session
// (the process set "mpi://SELF").
func (s *Session) Self() *Comm { return s.world.self }

// Logger returns the logger the session's records go to (WithLogger).
func (s *Session) Logger() *slog.Logger { return s.cfg.logger }

// check returns an error for op if the session cannot be used.
func (s *Session) check(op string) error {
	if s == nil {
		return noComm(errorf(ErrSession, op, "nil session"))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return noComm(errorf(ErrSession, op, "session %s is closed", s.cfg.name))
	}
	return nil
}

// Close ends the session (MPI_SESSION_FINALIZE), locally: it stops its
// listeners, delivers what its connections and its world sent while ctx
// lasts (a send whose receiver is alive but does not receive waits for
// ctx), then fails whatever is still pending, closes every connection
// and leaves its world. It never waits for another process to call
// Close. It returns ctx's error (matching ErrCanceled too) if ctx ended
// with sends undelivered; the session is closed all the same. The
// default session ends with Finalize, not Close.
func (s *Session) Close(ctx context.Context) error {
	if intercepted() {
		c := sessionCall(OpSessionClose, s)
		c.Ctx = ctx
		return c.run()
	}
	return s.pClose(ctx)
}

// pClose is Close without interception.
func (s *Session) pClose(ctx context.Context) error {
	if err := s.check("Close"); err != nil {
		return err
	}
	if s.def {
		return noComm(errorf(ErrSession, "Close", "the default session (Init's) ends with Finalize"))
	}
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.stopStat()
	err := s.end(ctx, "Close")
	if e := s.world.close(ctx); e != nil && err == nil {
		err = e
	}
	if err != nil {
		return sessionCloseError("Close", err)
	}
	return nil
}

// end stops the session's listeners and disconnects its connections,
// while ctx lasts; the caller has marked it closed.
func (s *Session) end(ctx context.Context, op string) error {
	s.mu.Lock()
	lns := make([]*Listener, 0, len(s.lns))
	for l := range s.lns {
		lns = append(lns, l)
	}
	conns := make([]*conn, 0, len(s.conns))
	for k := range s.conns {
		conns = append(conns, k)
	}
	s.mu.Unlock()
	for _, l := range lns {
		l.pClose()
	}
	s.pending.Wait() // handshakes under way end: the listeners are closed
	errs := make([]error, len(conns))
	var wg sync.WaitGroup
	for i, k := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = k.close(ctx)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// sessionCloseError is Close's error: the context's, or what went wrong.
func sessionCloseError(op string, err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return &Error{Class: ErrCanceled, Op: op, Detail: "sends were still undelivered when the context ended", Err: err}
	}
	return &Error{Class: ErrOther, Op: op, Detail: "closing the session", Err: err}
}

// add records a connection of the session; it fails if the session is
// closed, and the caller closes the connection.
func (s *Session) add(k *conn) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errorf(ErrSession, "Connect", "session %s was closed", s.cfg.name)
	}
	s.conns[k] = struct{}{}
	return nil
}

// remove forgets a connection the session no longer holds.
func (s *Session) remove(k *conn) {
	s.mu.Lock()
	delete(s.conns, k)
	s.mu.Unlock()
}

// Psets returns the names of the process sets the session knows
// (MPI_SESSION_GET_NUM_PSETS and MPI_SESSION_GET_NTH_PSET): "mpi://WORLD"
// and "mpi://SELF".
func (s *Session) Psets() []string { return []string{PsetWorld, PsetSelf} }

// The process sets every session has.
const (
	PsetWorld = "mpi://WORLD" // the session's world
	PsetSelf  = "mpi://SELF"  // this process alone
)

// GroupFromPset returns the group of process set name
// (MPI_GROUP_FROM_SESSION_PSET), ErrArg for a name the session does not
// know.
func (s *Session) GroupFromPset(name string) (*Group, error) {
	if err := s.check("GroupFromPset"); err != nil {
		return nil, err
	}
	switch name {
	case PsetWorld:
		return s.world.world.Group()
	case PsetSelf:
		return s.world.self.Group()
	}
	return nil, noComm(errorf(ErrArg, "GroupFromPset", "no process set %q (the session knows %v)", name, s.Psets()))
}

// CommFromGroup returns a communicator of the processes of g, a group
// of the session's world (MPI_COMM_CREATE_FROM_GROUP). It is collective
// over g's processes, which pass the same tag; concurrent calls on
// overlapping groups pass different tags. A process not in g gets
// ErrGroup.
func (s *Session) CommFromGroup(g *Group, tag string) (*Comm, error) {
	if intercepted() {
		c := sessionCall(OpCommFromGroup, s)
		c.group, c.Name = g, tag
		return c.runComm()
	}
	return s.pCommFromGroup(g, tag)
}

// pCommFromGroup is CommFromGroup without interception.
func (s *Session) pCommFromGroup(g *Group, tag string) (*Comm, error) {
	const op = "CommFromGroup"
	if err := s.check(op); err != nil {
		return nil, err
	}
	if g == nil {
		return nil, noComm(errorf(ErrGroup, op, "nil group"))
	}
	if err := g.check(op); err != nil {
		return nil, noComm(err)
	}
	p := s.world
	for i := 0; i < g.Size(); i++ {
		if w := g.worldRank(i); w >= p.ep.Size() {
			return nil, noComm(errorf(ErrGroup, op, "rank %d of the group is not a process of the session's world", i))
		}
	}
	if g.rankOf(p.ep.Rank()) == Undefined {
		return nil, noComm(errorf(ErrGroup, op, "this process is not in the group"))
	}
	ranks := g.worldRanks()
	// The agreement on a context runs on a context of its own, drawn
	// from the tag, among the group's processes alone.
	tmp := newComm(p, newGroup(ranks, p.ep.Rank()), tagPair(tag))
	pair, _, err := tmp.agreeContext(op)
	if err != nil {
		return nil, noComm(err)
	}
	return newComm(p, newGroup(ranks, p.ep.Rank()), pair), nil
}

// tagPair is the context pair CommFromGroup agrees on a context over for
// tag: above every pair agreeContext hands out.
func tagPair(tag string) uint32 {
	h := uint32(2166136261) // FNV-1a
	for i := 0; i < len(tag); i++ {
		h = (h ^ uint32(tag[i])) * 16777619
	}
	return 1<<30 | h&(1<<29-1)
}

// connSkew is the clock bound of a connection's world (WtimeSkew): its
// two sides' clocks are not aligned, so WtimeIsGlobal is false there.
var connSkew = math.Inf(1)
