//go:build linux && !race

package progress

import "golang.org/x/sys/unix"

// membarrier(2) commands.
const (
	membarrierQuery                   = 0
	membarrierGlobalExpedited         = 1 << 1
	membarrierRegisterGlobalExpedited = 1 << 2
)

// asymmetric reports whether this process takes part in asymmetric
// wake-ups: it registered for MEMBARRIER_CMD_GLOBAL_EXPEDITED, so a
// sleeper's heavy barrier reaches its threads, and its wakers may skip
// their fence. Set once at start.
var asymmetric = registerMembarrier()

func registerMembarrier() bool {
	if !useMembarrier.Get() {
		return false
	}
	r, _, e := unix.Syscall(unix.SYS_MEMBARRIER, membarrierQuery, 0, 0)
	if e != 0 || r&membarrierGlobalExpedited == 0 || r&membarrierRegisterGlobalExpedited == 0 {
		return false
	}
	_, _, e = unix.Syscall(unix.SYS_MEMBARRIER, membarrierRegisterGlobalExpedited, 0, 0)
	return e == 0
}

// heavyBarrier makes every running thread of every registered process
// execute a full memory barrier before it returns true.
func heavyBarrier() bool {
	_, _, e := unix.Syscall(unix.SYS_MEMBARRIER, membarrierGlobalExpedited, 0, 0)
	return e == 0
}
