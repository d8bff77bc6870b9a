//go:build !linux

package progress

import (
	"runtime"
	"sync/atomic"
	"time"
)

// futexWait polls *addr, sleeping in short steps, for at most d (forever if
// d <= 0): this platform has no futex Tachyon uses, so a parked engine wakes
// within about 50 microseconds of a ring rather than at once.
func futexWait(addr *uint32, val uint32, d time.Duration) {
	const step = 50 * time.Microsecond
	deadline := time.Now().Add(d)
	for atomic.LoadUint32(addr) == val {
		if d > 0 && !time.Now().Before(deadline) {
			return
		}
		time.Sleep(step)
	}
}

// futexWake does nothing: sleepers poll. It returns -1, for no count.
func futexWake(addr *uint32, n int) int { return -1 }

// osYield gives the processor to other goroutines: without sched_yield
// this is what the runtime offers.
func osYield() { runtime.Gosched() }
