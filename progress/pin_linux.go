package progress

import "golang.org/x/sys/unix"

// pinThread binds the calling OS thread to one CPU.
func pinThread(cpu int) error {
	var set unix.CPUSet
	set.Set(cpu)
	return unix.SchedSetaffinity(0, &set)
}
