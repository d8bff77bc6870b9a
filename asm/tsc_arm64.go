package asm

// HasTSC reports whether ReadTSC reads a hardware cycle counter rather than
// the operating system's monotonic clock.
const HasTSC = true

// ReadTSC returns the virtual counter (CNTVCT_EL0). The read may be taken
// early with respect to surrounding instructions; see ReadTSCOrdered.
//
//go:noescape
func ReadTSC() uint64

// ReadTSCOrdered returns the virtual counter read after an instruction
// synchronization barrier (ISB; MRS CNTVCT_EL0), so it is not taken before
// earlier instructions complete.
//
//go:noescape
func ReadTSCOrdered() uint64

// CounterFrequency returns the frequency of the counter in hertz
// (CNTFRQ_EL0), which the architecture defines as fixed.
func CounterFrequency() uint64 { return counterFrequency() }

//go:noescape
func counterFrequency() uint64

// Pause hints to the CPU that the caller is in a spin-wait loop (YIELD).
//
//go:noescape
func Pause()
