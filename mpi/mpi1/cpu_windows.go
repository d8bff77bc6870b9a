//go:build windows

package mpi1

import "golang.org/x/sys/windows"

// userCPU returns the process's user CPU time in seconds
// (GetProcessTimes), or -1 if the system will not say.
func userCPU() float64 {
	var c, e, k, u windows.Filetime
	if err := windows.GetProcessTimes(windows.CurrentProcess(), &c, &e, &k, &u); err != nil {
		return -1
	}
	return float64(uint64(u.HighDateTime)<<32|uint64(u.LowDateTime)) / 1e7
}
