package asm

// HasTSC reports whether ReadTSC reads a hardware cycle counter rather than
// the operating system's monotonic clock.
const HasTSC = true

// ReadTSC returns the time-stamp counter (RDTSC). The read is not ordered
// with respect to surrounding loads and stores: use it to time a stretch of
// code, and ReadTSCOrdered where the value must not be taken early.
//
//go:noescape
func ReadTSC() uint64

// ReadTSCOrdered returns the time-stamp counter read after every earlier
// instruction has completed (LFENCE; RDTSC, the sequence Linux uses for its
// own ordered reads), so a value taken after observing another thread's
// store is never smaller than a value that thread read before the store.
//
//go:noescape
func ReadTSCOrdered() uint64

// CounterFrequency returns the counter frequency in hertz when the hardware
// states it architecturally, or 0 when it must be measured (always 0 on
// amd64: see CPUID leaf 0x15 and calibration in package progress).
func CounterFrequency() uint64 { return 0 }

// Pause hints to the CPU that the caller is in a spin-wait loop (PAUSE),
// which saves power and frees resources for a sibling hyperthread.
//
//go:noescape
func Pause()

// CPUID executes the CPUID instruction for the given leaf and subleaf.
//
//go:noescape
func CPUID(leaf, subleaf uint32) (eax, ebx, ecx, edx uint32)
