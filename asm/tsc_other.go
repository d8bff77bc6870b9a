//go:build !amd64 && !arm64

package asm

import (
	"runtime"
	"time"
)

// HasTSC reports whether ReadTSC reads a hardware cycle counter rather than
// the operating system's monotonic clock.
const HasTSC = false

var epoch = time.Now()

// ReadTSC returns nanoseconds of the monotonic clock since an arbitrary
// point in this process's past: this architecture has no counter Tachyon
// reads directly.
func ReadTSC() uint64 { return uint64(time.Since(epoch)) }

// ReadTSCOrdered is ReadTSC: a monotonic clock read is already ordered.
func ReadTSCOrdered() uint64 { return uint64(time.Since(epoch)) }

// CounterFrequency returns the frequency of ReadTSC's counter in hertz:
// one count per nanosecond here.
func CounterFrequency() uint64 { return 1e9 }

// Pause yields the processor: this architecture has no spin-wait hint
// reachable without assembly.
func Pause() { runtime.Gosched() }
