package main

import "golang.org/x/sys/unix"

// pinThread binds the calling thread (locked to its goroutine) to cpu.
func pinThread(cpu int) {
	var set unix.CPUSet
	set.Set(cpu)
	unix.SchedSetaffinity(0, &set)
}
