package mpi

import (
	"fmt"
	"os"
	"runtime/debug"
	"sync"
	"sync/atomic"

	"github.com/tachyon-hpc/tachyon/engine"
)

// Run runs fn on n ranks, each a goroutine of this process handed its own
// World, and returns when every fn has returned; the first error returned
// (or panic recovered) wins. It needs no Init. A rank whose fn returns
// leaves the world: operations other ranks still wait on with it fail
// with ErrProcFailed instead of hanging.
func Run(n int, fn func(world *Comm) error) error {
	if n < 1 {
		return errorf(ErrArg, "Run", "a world needs at least one rank, not %d", n)
	}
	if fn == nil {
		return errorf(ErrArg, "Run", "nil function")
	}
	w, err := engine.NewWorld(n)
	if err != nil {
		return &Error{Class: ErrOther, Op: "Run", Detail: "making the world", Err: err}
	}
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
	)
	runWorlds.Add(1)
	defer runWorlds.Add(-1)
	s := runSession()
	defer s.endRun()
	for i := 0; i < n; i++ {
		p := newProc(w.Endpoint(i), nil)
		p.sess = s
		p.label(peerWorld)
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := runRank(p, fn)
			if err != nil {
				once.Do(func() { first = err })
			}
		}()
	}
	wg.Wait()
	return first
}

// runWorlds counts the worlds of Run under way, so that a package-level
// routine called from one of their ranks can say what to call instead.
var runWorlds atomic.Int32

// notInitialized is the error of a package-level routine, op, that needs
// the process's MPI when there is none: inside a rank of Run, it names
// what the rank calls instead, its World's method (alt).
func notInitialized(op, alt string) *Error {
	if runWorlds.Load() > 0 {
		return errorf(ErrNotInitialized, op, "MPI is not initialized in this process; a goroutine rank of Run calls its World's %s instead", alt)
	}
	return errorf(ErrNotInitialized, op, "MPI is not initialized")
}

// runRank runs fn as one rank and ends the rank afterwards, finalizing it
// if fn did not.
func runRank(p *proc, fn func(*Comm) error) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("mpi: rank %d panicked: %v\n%s", p.ep.Rank(), v, debug.Stack())
		}
		p.mu.Lock()
		done := p.ended()
		p.end()
		p.mu.Unlock()
		if !done {
			p.ep.Close()
		}
		p.unlabel()
	}()
	return fn(p.world)
}

// Finalize ends this rank of an in-process world as Finalize does for a
// process: collective over the world, delivering buffered sends first.
// Afterwards the rank's communicators return ErrNotInitialized.
func (c *Comm) Finalize() error {
	if err := c.check("Finalize"); err != nil {
		return err
	}
	if intercepted() {
		return newCall(OpFinalize, c).run()
	}
	return pFinalize(c)
}

// BufferAttach gives MPI buf for buffered sends (MPI_BUFFER_ATTACH). Ranks
// of Run use Comm.BufferAttach.
func BufferAttach(buf []byte) error {
	p := current()
	if p == nil {
		return notInitialized("BufferAttach", "BufferAttach (c.BufferAttach)")
	}
	return p.world.BufferAttach(buf)
}

// BufferDetach waits until every buffered message has left the attached
// buffer, and returns it (MPI_BUFFER_DETACH).
func BufferDetach() ([]byte, error) {
	p := current()
	if p == nil {
		return nil, notInitialized("BufferDetach", "BufferDetach (c.BufferDetach)")
	}
	return p.world.BufferDetach()
}

// BufferAttach is the package's BufferAttach for the rank c belongs to:
// what ranks of Run call.
func (c *Comm) BufferAttach(buf []byte) error {
	if intercepted() {
		call := newCall(OpBufferAttach, c)
		call.Bytes, call.buf = len(buf), buf
		return call.run()
	}
	return c.pBufferAttach(buf)
}

// pBufferAttach is BufferAttach without interception.
func (c *Comm) pBufferAttach(buf []byte) error {
	if err := c.check("BufferAttach"); err != nil {
		return err
	}
	if err := c.p.ep.BufferAttach(buf); err != nil {
		return c.fail(&Error{Class: ErrBuffer, Op: "BufferAttach", Detail: "attaching", Err: err})
	}
	return nil
}

// BufferDetach is the package's BufferDetach for the rank c belongs to.
func (c *Comm) BufferDetach() ([]byte, error) {
	if intercepted() {
		r, err := newCall(OpBufferDetach, c).runResult()
		return r.Buffer, err
	}
	return c.pBufferDetach()
}

// pBufferDetach is BufferDetach without interception.
func (c *Comm) pBufferDetach() ([]byte, error) {
	if err := c.check("BufferDetach"); err != nil {
		return nil, err
	}
	b, err := c.p.ep.BufferDetach()
	if err != nil {
		return nil, c.fail(&Error{Class: ErrBuffer, Op: "BufferDetach", Detail: "detaching", Err: err})
	}
	return b, nil
}

// BsendOverhead is the bytes a buffered send takes in the attached buffer
// beyond its message (MPI_BSEND_OVERHEAD).
const BsendOverhead = engine.BsendOverhead

// Launched reports whether a launcher (tachyonrun, or a PMI launcher such
// as MPICH's mpiexec) started this process as one rank of a job, so that
// Init joins that job rather than making a singleton. It also reports
// true for one of several ranks of a launcher whose jobs Tachyon cannot
// join (srun without --mpi=pmi2, Open MPI's mpirun), so that Init, which
// then fails with an error that says so, is not skipped.
func Launched() bool {
	for _, v := range []string{EnvSegment, "PMI_FD", "PMI_PORT"} {
		if os.Getenv(v) != "" {
			return true
		}
	}
	return unjoinable() != nil
}

// Main runs fn the way the process was started: as this process's rank of
// a launched job (Init, fn on World, Finalize), or, started alone, on n
// goroutine ranks with Run, each finalized after fn returns nil unless fn
// finalized it. Programs written against it, and tools intercepting them,
// see the same routines both ways.
func Main(n int, fn func(world *Comm) error) error {
	if !Launched() {
		return runStat(n, func(world *Comm) error {
			if err := fn(world); err != nil || world.p.ended() {
				return err
			}
			return world.Finalize()
		})
	}
	if err := Init(); err != nil {
		return err
	}
	if err := fn(World()); err != nil {
		Finalize()
		return err
	}
	return Finalize()
}
