//go:build unix

package mpi1

import "syscall"

// userCPU returns the process's user CPU time in seconds (getrusage), or
// -1 if the system will not say.
func userCPU() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return -1
	}
	return float64(ru.Utime.Sec) + float64(ru.Utime.Usec)/1e6
}
