package progress

import "github.com/tachyon-hpc/tachyon/asm"

// tscUnusable returns "": the arm64 generic timer's virtual counter is
// architecturally constant-rate and synchronized across cores.
func tscUnusable() string {
	if asm.CounterFrequency() == 0 {
		return "CNTFRQ_EL0 reads 0: firmware did not program the counter frequency"
	}
	return ""
}

// exactFrequency returns the counter frequency from CNTFRQ_EL0.
func exactFrequency() (float64, string) { return float64(asm.CounterFrequency()), "cntfrq" }

// nominalFrequency returns the counter frequency: arm64 states no other.
func nominalFrequency() float64 { return float64(asm.CounterFrequency()) }
