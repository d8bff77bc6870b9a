package affinity

import "golang.org/x/sys/unix"

// Threads returns, in increasing order, the CPUs the calling thread may
// run on (its sched_getaffinity mask).
func Threads() ([]int, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil, err
	}
	var cpus []int
	for c := 0; c < len(set)*64; c++ {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	return cpus, nil
}

// Bind restricts the calling thread, which the caller has locked
// (runtime.LockOSThread), to cpu, and returns the function that restores
// its previous mask.
func Bind(cpu int) (restore func(), err error) {
	var old, set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &old); err != nil {
		return nil, err
	}
	set.Set(cpu)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return nil, err
	}
	return func() { unix.SchedSetaffinity(0, &old) }, nil
}
