package main

import (
	"fmt"
	"runtime"
	"strings"
	"time"
)

// pauseFloor is the shortest gap between two clock readings that counts
// as a pause: a reading takes tens of nanoseconds.
const pauseFloor = 5 * time.Microsecond

// cpuPauses is what one CPU lost, while a thread pinned to it did nothing
// but read the clock, to pauses of pauseFloor or more: the host's (a
// hypervisor's ticks, other guests) and the kernel's.
type cpuPauses struct {
	cpu     int
	over    time.Duration // the time measured
	lost    time.Duration // in pauses
	count   int
	longest time.Duration
}

// hostPauses measures each of cpus in turn for d. A benchmark's two ranks
// stop together whenever either CPU pauses, and a message-rate figure
// spans only a few milliseconds: a pause of a millisecond halves it.
func hostPauses(cpus []int, d time.Duration) []cpuPauses {
	out := make([]cpuPauses, 0, len(cpus))
	for _, cpu := range cpus {
		out = append(out, measurePauses(cpu, d))
	}
	return out
}

// measurePauses watches cpu for d from a thread of its own, which ends
// with it: a pinned thread must not go back to the runtime's pool.
func measurePauses(cpu int, d time.Duration) cpuPauses {
	done := make(chan cpuPauses)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread exits with the goroutine
		pinThread(cpu)
		done <- watch(cpu, d)
	}()
	return <-done
}

// watch reads the clock for d and sums the gaps between readings.
func watch(cpu int, d time.Duration) cpuPauses {
	p := cpuPauses{cpu: cpu}
	start := time.Now()
	last := time.Duration(0)
	for last < d {
		now := time.Since(start)
		if gap := now - last; gap >= pauseFloor {
			p.lost += gap
			p.count++
			p.longest = max(p.longest, gap)
		}
		last = now
	}
	p.over = last
	return p
}

// add sums two measurements of one CPU.
func (p cpuPauses) add(q cpuPauses) cpuPauses {
	p.over += q.over
	p.lost += q.lost
	p.count += q.count
	p.longest = max(p.longest, q.longest)
	return p
}

// String describes the pauses on one line.
func (p cpuPauses) String() string {
	if p.count == 0 {
		return fmt.Sprintf("CPU %d none", p.cpu)
	}
	return fmt.Sprintf("CPU %d %.1f%% (%d, longest %s)", p.cpu,
		100*p.lost.Seconds()/p.over.Seconds(), p.count, p.longest.Round(time.Microsecond))
}

// pausesLine describes every CPU's pauses, or is empty.
func pausesLine(ps []cpuPauses) string {
	if len(ps) == 0 {
		return ""
	}
	parts := make([]string, len(ps))
	for i, p := range ps {
		parts[i] = p.String()
	}
	return fmt.Sprintf("host pauses of %s or more while a thread only read the clock, %s a CPU: %s",
		pauseFloor, ps[0].over.Round(time.Millisecond), strings.Join(parts, ", "))
}
