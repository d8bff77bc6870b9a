package main

import (
	"fmt"
	"runtime"
	"strings"
	"time"

	"github.com/tachyon-hpc/tachyon/asm"
)

// The host under the benchmark: what -compare measures of it before and
// after the runs, so that a table says in what state the figures were
// made and whether it changed while they were.

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

// pauseProbe is how long -compare watches each CPU for the host's pauses,
// before the runs and again after them.
const pauseProbe = 100 * time.Millisecond

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
	return fmt.Sprintf("host: pauses of %s or more while a thread only read the clock, %s a CPU: %s",
		pauseFloor, ps[0].over.Round(time.Millisecond), strings.Join(parts, ", "))
}

// lineCrossing returns the one-way time of a cache line between threads
// pinned to cpus[0] and cpus[1]: a word ping-ponged between them, the
// fastest of a few batches (a host pause lengthens a batch). On a VM the
// two vCPUs can sit on cores near or far from each other, and the
// placement can change from one minute to the next: a ratio against an
// anchor measured in another placement means little.
func lineCrossing(cpus []int) time.Duration {
	const batches, trips = 5, 2000
	type line struct {
		v uint64
		_ [56]byte
	}
	// Both threads spin at once: they need two Ps.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(max(2, runtime.GOMAXPROCS(0))))
	words := new([2]line)
	ping, pong := &words[0].v, &words[1].v
	done := make(chan struct{})
	go func() {
		runtime.LockOSThread() // never unlocked: the thread exits with the goroutine
		pinThread(cpus[1])
		for v := uint64(1); v <= batches*trips; v++ {
			for asm.LoadAcquire64(ping) != v {
			}
			asm.StoreRelease64(pong, v)
		}
		close(done)
	}()
	ch := make(chan time.Duration)
	go func() {
		runtime.LockOSThread()
		pinThread(cpus[0])
		best := time.Duration(1<<63 - 1)
		v := uint64(0)
		for range batches {
			start := time.Now()
			for range trips {
				v++
				asm.StoreRelease64(ping, v)
				for asm.LoadAcquire64(pong) != v {
				}
			}
			best = min(best, time.Since(start))
		}
		ch <- best / (2 * trips)
	}()
	best := <-ch
	<-done
	return best
}

// host is what -compare measured of the host: the line's crossing time
// and each CPU's pauses, before the runs and after them.
type host struct {
	cpus          []int
	before, after time.Duration
	pauses        []cpuPauses // before and after summed
}

// measureHost takes host's "before" measurements.
func measureHost(cpus []int) *host {
	return &host{cpus: cpus, before: lineCrossing(cpus), pauses: hostPauses(cpus, pauseProbe)}
}

// finish takes host's "after" measurements.
func (h *host) finish() {
	h.after = lineCrossing(h.cpus)
	for i, p := range hostPauses(h.cpus, pauseProbe) {
		h.pauses[i] = h.pauses[i].add(p)
	}
}

// String describes the host in two lines; empty for a nil host.
func (h *host) String() string {
	if h == nil {
		return ""
	}
	return fmt.Sprintf("host: a cache line crosses from CPU %d to CPU %d in %d ns before the runs, %d ns after\n%s",
		h.cpus[0], h.cpus[1], h.before.Nanoseconds(), h.after.Nanoseconds(), pausesLine(h.pauses))
}
