package progress

import (
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Futex operations without FUTEX_PRIVATE_FLAG: a doorbell may live in memory
// shared between processes, and a private futex would not see the other
// process's wake. The cost (hashing on the page rather than the address
// space) falls only on the sleep and wake paths, never on the message path.
const (
	futexWaitOp = 0 // FUTEX_WAIT
	futexWakeOp = 1 // FUTEX_WAKE
)

// futexWait sleeps while *addr == val, for at most d (forever if d <= 0). It
// returns at once if *addr != val, and may return early (signal, spurious
// wake): callers recheck their condition.
func futexWait(addr *uint32, val uint32, d time.Duration) {
	var ts *unix.Timespec
	if d > 0 {
		t := unix.NsecToTimespec(int64(d))
		ts = &t
	}
	unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(addr)), futexWaitOp, uintptr(val),
		uintptr(unsafe.Pointer(ts)), 0, 0)
}

// futexWake wakes up to n sleepers on addr and returns how many it woke.
// Neither it nor osYield blocks, so both go straight to the kernel
// (RawSyscall): the runtime's syscall bookkeeping would let sysmon hand
// the P to another thread when a yield lasts, and then wake sysmon up at
// its shortest period, preempting the ranks (docs/progress.md).
func futexWake(addr *uint32, n int) int {
	r, _, e := unix.RawSyscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(addr)), futexWakeOp, uintptr(n), 0, 0, 0)
	if e != 0 {
		return 0
	}
	return int(r)
}

// osYield gives the CPU to another runnable thread, if any (sched_yield).
func osYield() { unix.RawSyscall(unix.SYS_SCHED_YIELD, 0, 0, 0) }
