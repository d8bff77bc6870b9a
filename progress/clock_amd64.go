package progress

import (
	"github.com/klauspost/cpuid/v2"

	"github.com/tachyon-hpc/tachyon/asm"
)

// tscUnusable returns why the time-stamp counter cannot back the clock, or
// "" if it can: it must be invariant (CPUID 0x80000007 EDX bit 8), that is,
// tick at a constant rate in every P-, C- and T-state and on every core.
func tscUnusable() string {
	if max, _, _, _ := asm.CPUID(0x80000000, 0); max < 0x80000007 {
		return "CPU does not report whether its time-stamp counter is invariant"
	}
	if _, _, _, edx := asm.CPUID(0x80000007, 0); edx&(1<<8) == 0 {
		return "time-stamp counter is not invariant (CPUID 0x80000007 EDX bit 8 clear)"
	}
	return ""
}

// exactFrequency returns the counter frequency where the hardware states it
// exactly: CPUID leaf 0x15 (crystal clock times the TSC/crystal ratio), or
// the hypervisor's TSC frequency leaf 0x40000010 (kHz, so good to a fraction
// of a part per million). It returns 0 where neither is given.
func exactFrequency() (float64, string) {
	if max, _, _, _ := asm.CPUID(0, 0); max >= 0x15 {
		den, num, crystal, _ := asm.CPUID(0x15, 0)
		if den != 0 && num != 0 && crystal != 0 {
			return float64(crystal) * float64(num) / float64(den), "cpuid-0x15"
		}
	}
	if cpuid.CPU.VM() {
		if max, _, _, _ := asm.CPUID(0x40000000, 0); max >= 0x40000010 {
			if khz, _, _, _ := asm.CPUID(0x40000010, 0); khz != 0 {
				return float64(khz) * 1e3, "hypervisor"
			}
		}
	}
	return 0, ""
}

// nominalFrequency returns the base frequency the CPU reports (CPUID leaf
// 0x15/0x16 or its brand string, as read by klauspost/cpuid), 0 if unknown.
func nominalFrequency() float64 { return float64(cpuid.CPU.Hz) }
