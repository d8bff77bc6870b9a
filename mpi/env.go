package mpi

import (
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/tachyon-hpc/tachyon/engine"
	"github.com/tachyon-hpc/tachyon/progress"
	"github.com/tachyon-hpc/tachyon/rings"
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

// Thread support levels (MPI_THREAD_*).
const (
	ThreadSingle = iota
	ThreadFunneled
	ThreadSerialized
	ThreadMultiple
)

// Environment variables through which a launcher tells a process its
// place in a job.
const (
	EnvRank    = "TACHYON_RANK"    // this process's world rank
	EnvSize    = "TACHYON_SIZE"    // the number of ranks
	EnvSegment = "TACHYON_SEGMENT" // the job's shared-memory segment name
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
	p     *proc
}

// Init starts MPI in this process (MPI_INIT). Started by a launcher, the
// process joins its job as the rank the launcher gave it; started alone, it
// is a world of one rank. A second call, or a call after Finalize, is an
// error.
func Init() error {
	_, err := InitThread(ThreadMultiple)
	return err
}

// InitThread is Init that also reports the thread support it provides
// (MPI_INIT_THREAD): every routine is safe to call from any goroutine at
// any time, so it is always ThreadMultiple, whatever was required.
func InitThread(required int) (provided int, err error) {
	env.mu.Lock()
	defer env.mu.Unlock()
	switch env.state.Load() {
	case stateInit:
		return 0, errorf(ErrOther, "Init", "MPI is already initialized")
	case stateDone:
		return 0, errorf(ErrNotInitialized, "Init", "MPI was finalized and cannot be initialized again")
	}
	if required < ThreadSingle || required > ThreadMultiple {
		return 0, errorf(ErrArg, "InitThread", "thread level %d is not one of ThreadSingle..ThreadMultiple", required)
	}
	p, err := bootstrap()
	if err != nil {
		return 0, err
	}
	env.p = p
	env.state.Store(stateInit)
	return ThreadMultiple, nil
}

// bootstrap joins the job the environment describes, or makes a singleton.
func bootstrap() (*proc, error) {
	if os.Getenv("PMI_FD") != "" || os.Getenv("PMI_PORT") != "" {
		return nil, errorf(ErrOther, "Init", "started by a PMI launcher (PMI_FD or PMI_PORT set): PMI bootstrap is not supported yet; start the job with tachyonrun")
	}
	name := os.Getenv(EnvSegment)
	if name == "" {
		w, err := engine.NewWorld(1)
		if err != nil {
			return nil, &Error{Class: ErrOther, Op: "Init", Detail: "singleton world", Err: err}
		}
		return newProc(w.Endpoint(0), nil), nil
	}
	rank, err1 := strconv.Atoi(os.Getenv(EnvRank))
	size, err2 := strconv.Atoi(os.Getenv(EnvSize))
	if err1 != nil || err2 != nil || rank < 0 || rank >= size {
		return nil, errorf(ErrOther, "Init", "%s=%q and %s=%q do not give a rank and a size", EnvRank, os.Getenv(EnvRank), EnvSize, os.Getenv(EnvSize))
	}
	seg, err := rings.OpenSegment(name)
	if err != nil {
		return nil, &Error{Class: ErrOther, Op: "Init", Detail: "opening the job's segment", Err: err}
	}
	ep, err := engine.OpenShm(seg, rank)
	if err != nil {
		seg.Close()
		return nil, &Error{Class: ErrOther, Op: "Init", Detail: "joining the job", Err: err}
	}
	if ep.Size() != size {
		ep.Close()
		seg.Close()
		return nil, errorf(ErrOther, "Init", "%s=%d but the job's segment holds %d ranks", EnvSize, size, ep.Size())
	}
	return newProc(ep, func() { seg.Close() }), nil
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
	env.mu.Lock()
	defer env.mu.Unlock()
	if env.state.Load() != stateInit {
		return errorf(ErrNotInitialized, "Finalize", "MPI is not initialized")
	}
	err := env.p.finalize()
	env.state.Store(stateDone)
	return err
}

// Version returns the version of the MPI standard whose semantics this
// package follows (MPI_GET_VERSION).
func Version() (major, minor int) { return 4, 1 }

// Abort ends every rank of c's job with code as the exit status
// (MPI_ABORT). Ranks of an in-process world are goroutines of this
// process, so the whole process exits.
func Abort(c *Comm, code int) {
	msg := fmt.Sprintf("Abort(%d) called", code)
	if p := current(); p != nil {
		p.ep.Abort(code, msg)
	}
	if c != nil && c.p != nil {
		c.p.ep.Abort(code, msg)
	}
	fmt.Fprintf(os.Stderr, "tachyon: %s\n", msg)
	os.Exit(code)
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
