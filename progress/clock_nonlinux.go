//go:build !linux

package progress

import "time"

// monotonicRaw reads the monotonic clock in nanoseconds: CLOCK_MONOTONIC_RAW
// is Linux's.
func monotonicRaw() int64 { return int64(time.Since(monoEpoch)) }

// monotonicResolution returns one microsecond: the resolution Go promises
// for its monotonic clock on every platform, though most do better.
func monotonicResolution() float64 { return 1e-6 }
