package mpi

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/tachyon-hpc/tachyon/engine"
	"github.com/tachyon-hpc/tachyon/pmi"
	"github.com/tachyon-hpc/tachyon/progress"
)

// Wildcards and special values.
const (
	AnySource = -1     // wildcard source for receives and probes
	AnyTag    = -1     // wildcard tag
	ProcNull  = -2     // send/recv to it complete at once; Status.Source == ProcNull
	Undefined = -32766 // MPI_UNDEFINED
	// TagUB is the largest tag (the MPI_TAG_UB attribute).
	TagUB = 1<<31 - 1
)

// Root is the root argument the root itself passes to a rooted collective
// (Bcast, Reduce, Gather, Scatter and their v-forms) on an
// intercommunicator (MPI_ROOT), beside ProcNull: there the root's group
// passes Root at the root and ProcNull at its other ranks, which take no
// part, and the other group passes the root's rank in the root's group
// (its remote group). On an intracommunicator every rank passes the
// root's rank, and Root is ErrRoot.
const Root = -3

// ThreadLevel is a thread support level (MPI_THREAD_*). Levels are
// ordered: each allows what the ones below it allow.
type ThreadLevel int

// Thread support levels.
const (
	ThreadSingle ThreadLevel = iota
	ThreadFunneled
	ThreadSerialized
	ThreadMultiple
)

var threadLevelNames = [...]string{"ThreadSingle", "ThreadFunneled", "ThreadSerialized", "ThreadMultiple"}

func (l ThreadLevel) String() string {
	if l >= 0 && int(l) < len(threadLevelNames) {
		return threadLevelNames[l]
	}
	return "ThreadLevel(" + strconv.Itoa(int(l)) + ")"
}

// Environment variables through which a launcher tells a process its
// place in a job (engine's, which launch sets).
const (
	EnvRank    = engine.EnvRank    // this process's world rank
	EnvSize    = engine.EnvSize    // the number of ranks
	EnvSegment = engine.EnvSegment // the job's shared-memory segment name
)

// The process's environment: not initialized, initialized, finalized.
const (
	stateNone = iota
	stateInit
	stateDone
)

var env struct {
	mu    sync.Mutex
	state atomic.Int32
	s     *Session    // the default session; set before state becomes stateInit
	p     *proc       // its world
	pmi   *pmi.Client // the PMI launcher's connection, for Finalize and Abort; set before state becomes stateInit
}

// Init starts MPI in this process (MPI_INIT): the default session, which
// the package-level routines use. Started by a launcher, the process
// joins its job as the rank the launcher gave it; started alone, it is a
// world of one rank. A second call, or a call after Finalize, is an
// error.
//
// Unlike MPI_INIT, whose thread level is MPI_THREAD_SINGLE, Init provides
// ThreadMultiple: any goroutine may call any routine at any time, as Go
// programs expect. A program that calls MPI from one goroutine at a time
// can say so with InitThread(ThreadSerialized) and skip the locking.
func Init() error {
	_, err := InitThread(ThreadMultiple)
	return err
}

// InitThread is Init with a thread support level (MPI_INIT_THREAD), which
// it provides exactly:
//
//   - ThreadMultiple: every routine is safe to call from any goroutine at
//     any time.
//   - ThreadSerialized, ThreadFunneled, ThreadSingle: the program promises
//     that no two goroutines are ever inside MPI routines at once (Go has no
//     main thread to funnel through, so the three mean the same here). The
//     rank then takes no lock on its message path and rings no doorbell for
//     its own completions, which on amd64 saves locked instructions that
//     stall behind the previous message's stores. Breaking the promise is a
//     data race, which the race detector reports.
//
// QueryThread reports the level later.
func InitThread(required ThreadLevel) (provided ThreadLevel, err error) {
	if intercepted() {
		c := newCall(OpInit, nil)
		c.Level = int(required)
		r, err := c.runResult()
		return r.Provided, err
	}
	return pInitThread(required)
}

// pInitThread is InitThread without interception.
func pInitThread(required ThreadLevel) (provided ThreadLevel, err error) {
	env.mu.Lock()
	defer env.mu.Unlock()
	switch env.state.Load() {
	case stateInit:
		return 0, errorf(ErrOther, "Init", "MPI is already initialized")
	case stateDone:
		return 0, errorf(ErrNotInitialized, "Init", "MPI was finalized and cannot be initialized again")
	}
	if required < ThreadSingle || required > ThreadMultiple {
		return 0, errorf(ErrArg, "InitThread", "thread level %v is not one of ThreadSingle..ThreadMultiple", required)
	}
	cfg := defaultSessionConfig()
	cfg.thread = required
	cfg.name = "default"
	s, err := newSession(cfg, "Init")
	if err != nil {
		return 0, err
	}
	s.def = true
	env.s, env.p, env.pmi = s, s.world, s.pmi
	env.state.Store(stateInit)
	return required, nil
}

// DefaultSession returns the session Init made, nil before Init and
// after Finalize: a program that called Init listens and dials through
// it. It ends with Finalize.
func DefaultSession() *Session {
	if current() == nil {
		return nil
	}
	return env.s
}

// QueryThread returns the thread support level this process's MPI
// provides (MPI_QUERY_THREAD): the level InitThread provided, or
// ThreadMultiple after Init. (The ranks of Run always have
// ThreadMultiple.)
func QueryThread() (ThreadLevel, error) {
	p := current()
	if p == nil {
		return 0, errorf(ErrNotInitialized, "QueryThread", "MPI is not initialized")
	}
	return p.thread, nil
}

// bootstrap joins the job the environment describes, or makes a
// singleton; under a PMI launcher it returns the launcher's connection.
func bootstrap(o joinOptions) (*proc, *pmi.Client, error) {
	c, err := pmi.FromEnv()
	if err != nil {
		return nil, nil, &Error{Class: ErrOther, Op: "Init", Detail: "connecting to the PMI launcher (PMI_FD or PMI_PORT is set)", Err: err}
	}
	if c != nil {
		p, err := bootstrapPMI(c, o)
		if err != nil {
			return nil, nil, err
		}
		return p, c, nil
	}
	name := os.Getenv(EnvSegment)
	if name == "" {
		if err := unjoinable(); err != nil {
			return nil, nil, err
		}
		w, err := engine.NewWorld(1, o.progress...)
		if err != nil {
			return nil, nil, &Error{Class: ErrOther, Op: "Init", Detail: "singleton world", Err: err}
		}
		return newProc(w.Endpoint(0), nil), nil, nil
	}
	rank, err1 := strconv.Atoi(os.Getenv(EnvRank))
	size, err2 := strconv.Atoi(os.Getenv(EnvSize))
	if err1 != nil || err2 != nil || rank < 0 || rank >= size {
		return nil, nil, errorf(ErrOther, "Init", "%s=%q and %s=%q do not give a rank and a size", EnvRank, os.Getenv(EnvRank), EnvSize, os.Getenv(EnvSize))
	}
	ep, err := engine.OpenShmJob(name, rank, o.progress...)
	if err != nil {
		return nil, nil, &Error{Class: ErrOther, Op: "Init", Detail: "joining the job", Err: err}
	}
	if ep.Size() != size {
		ep.Close()
		return nil, nil, errorf(ErrOther, "Init", "%s=%d but the job's segment holds %d ranks", EnvSize, size, ep.Size())
	}
	return newProc(ep, nil), nil, nil
}

// unjoinable returns an error if a launcher whose jobs Tachyon cannot join
// started this process as one of several ranks: Slurm's srun without a
// PMI-1 connection (no --mpi=pmi2, or --mpi=pmix), or a PMIx launcher such
// as Open MPI's mpirun. Made a singleton, each such process would run a
// world of its own and the job would silently be several jobs of one.
func unjoinable() error {
	if n := os.Getenv("SLURM_STEP_NUM_TASKS"); n != "" && n != "1" {
		// srun's tasks; a batch script (SLURM_NTASKS but no step) is not one.
		return errorf(ErrOther, "Init", "srun started this process as task %s of %s without a PMI-1 connection (PMI_FD is unset): run srun --mpi=pmi2, or set MpiDefault=pmi2 in slurm.conf (Tachyon does not speak PMIx)", os.Getenv("SLURM_PROCID"), n)
	}
	if n := os.Getenv("OMPI_COMM_WORLD_SIZE"); n != "" && n != "1" {
		return errorf(ErrOther, "Init", "Open MPI's mpirun started this process as rank %s of %s, but Tachyon cannot join its jobs (it speaks PMIx only): launch with tachyonrun, MPICH's mpiexec or srun --mpi=pmi2", os.Getenv("OMPI_COMM_WORLD_RANK"), n)
	}
	if r := os.Getenv("PMIX_RANK"); r != "" && r != "0" {
		// PMIx hands out the job's size only through its library.
		return errorf(ErrOther, "Init", "a PMIx launcher started this process as rank %s, but Tachyon speaks only PMI-1: launch with tachyonrun, MPICH's mpiexec or srun --mpi=pmi2", r)
	}
	return nil
}

// Initialized reports whether Init has been called (MPI_INITIALIZED); it
// stays true after Finalize.
func Initialized() bool { return env.state.Load() != stateNone }

// Finalized reports whether Finalize has completed (MPI_FINALIZED).
func Finalized() bool { return env.state.Load() == stateDone }

// Finalize ends MPI in this process (MPI_FINALIZE). It is collective over
// the world: it delivers buffered sends (an implicit BufferDetach), waits
// until every rank has called it, meanwhile answering other ranks'
// cancellations, and then releases everything. Afterwards every routine
// but Version, Initialized and Finalized returns ErrNotInitialized.
func Finalize() error {
	if intercepted() {
		return newCall(OpFinalize, World()).run()
	}
	return pFinalize(nil)
}

// pFinalize is Finalize without interception for c nil or a communicator
// of the process's MPI, and Comm.Finalize for c of a rank of Run.
func pFinalize(c *Comm) error {
	if c != nil && env.p != c.p {
		if err := c.check("Finalize"); err != nil {
			return err
		}
		if s := c.p.sess; c.p.conn != nil || s != nil && !s.inRun && !s.def {
			return c.fail(errorf(ErrSession, "Finalize", "%s belongs to a session of NewSession or a connection: it ends with Session.Close or Disconnect", c.label()))
		}
		return c.p.finalize()
	}
	env.mu.Lock()
	defer env.mu.Unlock()
	if env.state.Load() != stateInit {
		return notInitialized("Finalize", "Finalize (c.Finalize)")
	}
	env.s.stopStat()
	// The session's connections first, locally: Finalize is collective
	// over the world alone.
	env.s.mu.Lock()
	env.s.closed = true
	env.s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), disconnectTimeout.Get())
	cerr := env.s.end(ctx, "Finalize")
	cancel()
	err := env.p.finalize()
	if cerr != nil && err == nil {
		err = sessionCloseError("Finalize", cerr)
	}
	if c := env.pmi; c != nil {
		if e := c.Finalize(); e != nil && err == nil {
			err = &Error{Class: ErrOther, Op: "Finalize", Detail: "finalizing the PMI connection", Err: e}
		}
	}
	env.state.Store(stateDone)
	return err
}

// Version returns the version of the MPI standard whose semantics this
// package follows (MPI_GET_VERSION).
func Version() (major, minor int) { return 4, 1 }

// Abort ends every rank of c's job with code as the exit status
// (MPI_ABORT). Ranks of an in-process world are goroutines of this
// process, so the whole process exits. Under a PMI launcher (mpiexec),
// the launcher is told first, so that it ends every rank and exits with
// code. It says why in one Error record to c's session's logger
// (WithLogger; slog.Default() for Init's) before it ends anything.
//
// Interceptors see it as OpAbort before anything ends; the job ends
// whether or not they call next.
func Abort(c *Comm, code int) {
	if intercepted() {
		call := newCall(OpAbort, c)
		call.Code = code
		intercept(call) // at the chain's end, pAbort: no return
	}
	pAbort(c, code)
}

// pAbort is Abort without interception.
func pAbort(c *Comm, code int) { abort(c, code, fmt.Sprintf("Abort(%d) called", code), nil) }

// abort is Abort with msg saying why, and the error that made the job
// end, if one did (ErrorsAreFatal, ErrorsAbort).
func abort(c *Comm, code int, msg string, cause error) {
	lg, rank := abortLogger(c)
	attrs := []any{"rank", rank, "reason", msg, "exit_status", code}
	if cause != nil {
		attrs = append(attrs, "err", cause)
	}
	// Said first: under a launcher the job may end as soon as it hears.
	lg.Error("tachyon: aborting the job", attrs...)
	stopAllStat(lg)
	if p := current(); p != nil {
		if c := env.pmi; c != nil {
			c.Abort(code, msg)
			os.Exit(code)
		}
		p.ep.Abort(code)
	}
	if c != nil && c.p != nil {
		c.p.ep.Abort(code)
	}
	os.Exit(code)
}

// abortLogger returns the logger abort says why on, c's session's or
// else the default session's (slog.Default() when there is neither), and
// the rank it speaks for: c's, else the process's, -1 if unknown.
func abortLogger(c *Comm) (*slog.Logger, int) {
	var p *proc
	if c != nil && c.p != nil {
		p = c.p
	} else {
		p = current()
	}
	if p == nil {
		return slog.Default(), -1
	}
	return p.logger(), p.ep.Rank()
}

// current returns the process's initialized environment, nil if none.
func current() *proc {
	if env.state.Load() != stateInit {
		return nil
	}
	return env.p
}

// World returns the communicator of every rank of the job
// (MPI_COMM_WORLD), nil before Init. Ranks of Run get theirs from Run.
func World() *Comm {
	if p := env.p; p != nil && env.state.Load() != stateNone {
		return p.world
	}
	return nil
}

// Self returns the communicator holding only this rank (MPI_COMM_SELF),
// nil before Init.
func Self() *Comm {
	if p := env.p; p != nil && env.state.Load() != stateNone {
		return p.self
	}
	return nil
}

// ProcessorName returns the name of the host this process runs on
// (MPI_GET_PROCESSOR_NAME).
func ProcessorName() string {
	h, err := os.Hostname()
	if err != nil {
		return "localhost"
	}
	return h
}

// Wtime returns seconds since a fixed point in this process's past
// (MPI_WTIME), read from the calibrated time-stamp counter.
func Wtime() float64 { return progress.Wtime() }

// Wtick returns the resolution of Wtime in seconds (MPI_WTICK).
func Wtick() float64 { return progress.Wtick() }
