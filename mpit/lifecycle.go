package mpit

import (
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/tachyon-hpc/tachyon/pvar"
)

// The interface's reference count and generation. Every Init that finds the
// count at zero starts a new generation; sessions and handles remember the
// generation they were made in and are invalid in any other, so a Finalize
// that brings the count to zero frees them all.
var life struct {
	mu    sync.Mutex
	count int
	gen   uint64        // last generation started
	live  atomic.Uint64 // gen while count > 0, else 0: read without mu
	// The watermark windows of handles not yet freed, closed when the
	// generation ends: a window holds one of a watermark's few slots.
	windows map[*pvar.Window]struct{}
}

// trackWindow records an open window of a handle of this generation.
func trackWindow(w *pvar.Window) {
	life.mu.Lock()
	defer life.mu.Unlock()
	if life.windows == nil {
		life.windows = make(map[*pvar.Window]struct{})
	}
	life.windows[w] = struct{}{}
}

// untrackWindow forgets a window its handle closes.
func untrackWindow(w *pvar.Window) {
	life.mu.Lock()
	defer life.mu.Unlock()
	delete(life.windows, w)
}

// Init initializes the interface (MPI_T_INIT_THREAD) or, if it is
// initialized already, adds one to its reference count. It may be called
// at any time: before the MPI environment is initialized, while it runs and
// after it is finalized; the interface does not depend on it. Every
// function of this package is safe for concurrent use (MPI_THREAD_MULTIPLE
// is provided), so Init takes no thread level. It returns nil.
func Init() error {
	life.mu.Lock()
	defer life.mu.Unlock()
	if life.count == 0 {
		life.gen++
		life.live.Store(life.gen)
	}
	life.count++
	return nil
}

// Finalize undoes one Init (MPI_T_FINALIZE). While Finalize has been called
// fewer times than Init the interface stays initialized; the call that
// brings the count to zero finalizes it, and every session and handle made
// before then becomes invalid, for good (a later Init does not revive
// them). A Finalize without an outstanding Init returns ErrNotInitialized.
func Finalize() error {
	life.mu.Lock()
	defer life.mu.Unlock()
	if life.count == 0 {
		return errorf(ErrNotInitialized, "Finalize called more times than Init")
	}
	life.count--
	if life.count == 0 {
		life.live.Store(0)
		for w := range life.windows {
			w.Close()
		}
		clear(life.windows)
	}
	return nil
}

// InitCount reports how many Inits are outstanding; zero means the
// interface is not initialized.
func InitCount() int {
	life.mu.Lock()
	defer life.mu.Unlock()
	return life.count
}

// current returns the live generation, or ErrNotInitialized naming op.
func current(op string) (uint64, error) {
	if g := life.live.Load(); g != 0 {
		return g, nil
	}
	return 0, errorf(ErrNotInitialized, op+" before Init")
}

// checkGen returns nil if an object made in generation gen is usable now:
// ErrNotInitialized if the interface is not initialized, else bad (a
// handle or session class) if gen is an earlier generation's.
func checkGen(op string, gen uint64, bad Error) error {
	g, err := current(op)
	if err != nil {
		return err
	}
	if g != gen {
		return errorf(bad, op+": made before the interface was finalized (generation "+
			strconv.FormatUint(gen, 10)+", now "+strconv.FormatUint(g, 10)+")")
	}
	return nil
}
