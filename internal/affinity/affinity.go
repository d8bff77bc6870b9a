// Package affinity reads and sets the CPU affinity of the calling thread,
// for the tests and benchmarks that pin the two ends of a ping-pong to
// different CPUs. Only Linux has it here (sched_getaffinity,
// sched_setaffinity); elsewhere every call fails with ErrUnsupported and
// the callers skip.
package affinity

import "errors"

// ErrUnsupported is returned where this system's affinity calls are not
// wired up.
var ErrUnsupported = errors.New("affinity: CPU affinity needs Linux here")
