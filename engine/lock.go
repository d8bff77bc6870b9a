package engine

import (
	"runtime"
	"sync/atomic"

	"github.com/tachyon-hpc/tachyon/asm"
)

// spinLock guards an endpoint's queues between the goroutine polling it
// and goroutines posting operations. It is held for a few hundred
// nanoseconds at most and never across a wait, so a contender spins
// briefly and then yields instead of parking in the kernel.
type spinLock struct{ v uint32 }

func (l *spinLock) tryLock() bool {
	return asm.LoadAcquire32(&l.v) == 0 && atomic.CompareAndSwapUint32(&l.v, 0, 1)
}

func (l *spinLock) lock() {
	for i := 0; !l.tryLock(); i++ {
		if i < 64 {
			asm.Pause()
		} else {
			runtime.Gosched()
		}
	}
}

func (l *spinLock) unlock() { asm.StoreRelease32(&l.v, 0) }
