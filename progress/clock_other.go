//go:build !amd64 && !arm64

package progress

// tscUnusable explains that this architecture has no counter Tachyon reads.
func tscUnusable() string { return "no time-stamp counter support on this architecture" }

func exactFrequency() (float64, string) { return 0, "" }

func nominalFrequency() float64 { return 0 }
