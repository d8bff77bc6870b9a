// Command tachyonclock shows the clock Tachyon uses on this machine and how
// well its timers keep time: the source and frequency behind Wtime and
// Wtick, what a Wtime call costs beside time.Now, and how late timer
// requests complete while a goroutine waits on them.
//
// Usage:
//
//	tachyonclock [-timers N] [-spread DURATION] [-calls N]
//
// docs/progress.md describes the clock and the timers it measures.
package main

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/tachyon-hpc/tachyon/progress"
)

func main() {
	timers := flag.Int("timers", 10000, "number of timer requests to fire")
	spread := flag.Duration("spread", 100*time.Millisecond, "span over which the timers fall due")
	calls := flag.Int("calls", 2_000_000, "Wtime and time.Now calls to time")
	flag.Parse()
	if *timers < 1 || *spread <= 0 || *calls < 1 {
		fmt.Fprintln(os.Stderr, "tachyonclock: -timers and -calls must be at least 1 and -spread positive")
		os.Exit(2)
	}
	if err := run(*timers, *spread, *calls); err != nil {
		fmt.Fprintln(os.Stderr, "tachyonclock:", err)
		os.Exit(1)
	}
}

func run(timers int, spread time.Duration, calls int) error {
	start := progress.Wtime()
	info := progress.Clock()
	fmt.Printf("clock            %s", info.Source)
	if info.Fallback != "" {
		fmt.Printf(" (not tsc: %s)", info.Fallback)
	}
	fmt.Println()
	fmt.Printf("frequency        %.6f MHz (%s)\n", info.Frequency/1e6, info.FrequencySource)
	if info.Calibrated > 0 {
		fmt.Printf("calibrated       %.6f MHz in %v\n", info.Calibrated/1e6, info.CalibrationTime.Round(time.Microsecond))
	}
	if info.Nominal > 0 {
		fmt.Printf("nominal          %.6f MHz\n", info.Nominal/1e6)
	}
	fmt.Printf("ordered reads    %v\n", info.Ordered)
	fmt.Printf("Wtick            %.3g s\n", progress.Wtick())
	fmt.Printf("Wtime            %.9f s (at start %.9f s)\n", progress.Wtime(), start)

	var sink float64
	t0 := time.Now()
	for range calls {
		sink += progress.Wtime()
	}
	t1 := time.Now()
	var last time.Time
	for range calls {
		last = time.Now()
	}
	t2 := time.Now()
	_ = last
	wt := float64(t1.Sub(t0).Nanoseconds()) / float64(calls)
	tn := float64(t2.Sub(t1).Nanoseconds()) / float64(calls)
	fmt.Printf("Wtime call       %.1f ns   time.Now %.1f ns   ratio %.2f\n", wt, tn, wt/tn)

	e, err := progress.New()
	if err != nil {
		return err
	}
	defer e.Close()
	// Arm every timer first, then poll as a waiting caller would. Beside
	// each timer's lateness, record the floor a perfect timer would show:
	// the end of the first poll that began after its due time. Where the
	// host takes the CPU away for tens of microseconds at a time, that
	// floor, not the timers, sets the tail.
	step := spread.Seconds() / float64(timers)
	lead := 20e-3
	rs := make([]*progress.TimerRequest, timers)
	dues := make([]float64, timers)
	for i := range rs {
		due := lead + float64(i)*step
		dues[i] = progress.Wtime() + due
		if rs[i], err = e.NewTimer(due); err != nil {
			return err
		}
	}
	late := make([]float64, 0, timers)
	floor := make([]float64, 0, timers)
	early := 0
	for i, j := 0, 0; i < timers; {
		begin := progress.Wtime()
		e.Progress()
		now := progress.Wtime()
		for ; j < timers && dues[j] <= begin; j++ {
			floor = append(floor, (now-dues[j])*1e6)
		}
		for ; i < timers && rs[i].Done(); i++ {
			if now < dues[i] {
				early++
			}
			late = append(late, (now-dues[i])*1e6)
		}
	}
	slices.Sort(late)
	slices.Sort(floor)
	q := func(v []float64, p float64) float64 { return v[int(p*float64(len(v)-1))] }
	fmt.Printf("timers           %d over %v: late p50 %.2f us  p99 %.2f us  max %.2f us  early %d\n",
		timers, spread, q(late, 0.5), q(late, 0.99), late[len(late)-1], early)
	if len(floor) > 0 {
		fmt.Printf("polling floor    p50 %.2f us  p99 %.2f us (a perfect timer seen by the same loop)\n",
			q(floor, 0.5), q(floor, 0.99))
	}
	if early > 0 {
		return fmt.Errorf("%d timers completed early", early)
	}
	return nil
}
