package progress

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// monotonicRaw reads CLOCK_MONOTONIC_RAW (not slewed by NTP) in
// nanoseconds. It uses a raw system call: clock_gettime never blocks, and
// the scheduler hand-off of an ordinary system call would widen every
// calibration bracket (docs/progress.md, Calibration).
func monotonicRaw() int64 {
	var ts unix.Timespec
	unix.RawSyscall(unix.SYS_CLOCK_GETTIME, unix.CLOCK_MONOTONIC_RAW, uintptr(unsafe.Pointer(&ts)), 0)
	return ts.Nano()
}

// monotonicResolution returns the resolution the kernel states for
// CLOCK_MONOTONIC, the clock Go's monotonic time reads.
func monotonicResolution() float64 {
	var ts unix.Timespec
	if err := unix.ClockGetres(unix.CLOCK_MONOTONIC, &ts); err != nil || ts.Nano() <= 0 {
		return 1e-9
	}
	return float64(ts.Nano()) * 1e-9
}
