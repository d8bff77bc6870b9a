//go:build !unix && !windows

package mpi1

// userCPU returns -1: this system has no call for a process's CPU time
// that Go offers.
func userCPU() float64 { return -1 }
