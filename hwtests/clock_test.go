//go:build linux

package hwtests

import (
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tachyon-hpc/tachyon/mpi"
	"github.com/tachyon-hpc/tachyon/progress"
)

// One clock across hosts (MPI_WTIME_IS_GLOBAL): the ranks of a job, each
// a host of its own, start with clocks deliberately apart, and Init and
// the network's clock probes bring them together within the bound they
// report. The hosts share this machine's time-stamp counter, so the test
// knows every clock's true line and can check the bound.

// clockEnv carries the test's clock line (base and counts a second) to
// the ranks of a "clock" job, which distort it as clockDistortion says.
const clockEnv = "TACHYON_HWTEST_CLOCK"

// clockDistortion is how far each rank's clock starts from the test's:
// ahead by seconds, and fast by a fraction (seconds a count more).
var clockDistortion = map[int]struct{ ahead, fast float64 }{
	0: {0, 0},
	1: {3e-3, 100e-6},
	2: {0, -50e-6},
}

// startDistortedClock starts this process's clock, before Init, as the
// test's line distorted for this rank.
func startDistortedClock() error {
	f := strings.Split(os.Getenv(clockEnv), ",")
	rank, err := strconv.Atoi(os.Getenv("PMI_RANK"))
	if len(f) != 2 || err != nil {
		return fmt.Errorf("%s=%q, PMI_RANK=%q", clockEnv, os.Getenv(clockEnv), os.Getenv("PMI_RANK"))
	}
	base, err1 := strconv.ParseUint(f[0], 10, 64)
	hz, err2 := strconv.ParseFloat(f[1], 64)
	if err1 != nil || err2 != nil {
		return fmt.Errorf("%s=%q", clockEnv, os.Getenv(clockEnv))
	}
	d := clockDistortion[rank]
	base -= uint64(d.ahead * hz)
	hz /= 1 + d.fast
	if !progress.StartSharedClock(base, hz) {
		return fmt.Errorf("rank %d: the clock had started", rank)
	}
	return nil
}

// clockJob is one rank of a "clock" job: for a hundred rounds of 20 ms
// (about two seconds) it polls, as a rank inside MPI calls does, so that
// clock probes are answered at once, with a barrier between rounds; then it
// prints its clock line, the count it read it at, and its bound, for the
// test.
func clockJob(w *mpi.Comm) error {
	for range 100 { // a count, not a time: every rank must make as many barriers
		if err := w.Barrier(); err != nil {
			return err
		}
		for t := time.Now(); time.Since(t) < 20*time.Millisecond; {
			if _, _, err := w.Iprobe(mpi.AnySource, 99); err != nil {
				return err
			}
		}
	}
	if err := w.Barrier(); err != nil {
		return err
	}
	x := progress.Now()
	base, hz, _ := progress.SharedClock()
	fmt.Printf("clock rank %d at %d base %d hz %v bound %v global %v\n", w.Rank(), x, base, hz, w.WtimeSkew(), w.WtimeIsGlobal())
	return w.Barrier() // no rank steers after another printed
}

// checkClocks reads the lines the ranks of a clock job printed and checks
// that, at one count of the counter (the last a rank read its line at,
// after a barrier), every two ranks' Wtimes agree within the bounds they
// reported, and within a tenth of the 3 ms they started apart.
func checkClocks(t *testing.T, out string, n int) {
	t.Helper()
	type line struct {
		base uint64
		hz   float64
	}
	lines := make([]line, n)
	var x uint64
	bound := 0.0
	seen := 0
	for _, text := range strings.Split(out, "\n") {
		var r int
		var at, base uint64
		var hz, b float64
		var global bool
		if _, err := fmt.Sscanf(text, "clock rank %d at %d base %d hz %g bound %g global %t", &r, &at, &base, &hz, &b, &global); err != nil || r < 0 || r >= n {
			continue
		}
		lines[r] = line{base, hz}
		x = max(x, at)
		bound = max(bound, b)
		seen++
		if global != (b <= 1e-6) {
			t.Errorf("rank %d: global %v with bound %v", r, global, b)
		}
	}
	if seen != n {
		t.Fatalf("%d of %d ranks printed their clocks:\n%s", seen, n, out)
	}
	if !(bound > 0) || math.IsInf(bound, 1) {
		t.Fatalf("bound %v s\n%s", bound, out)
	}
	w := make([]float64, n)
	for r, l := range lines {
		w[r] = float64(int64(x-l.base)) / l.hz
	}
	worst := 0.0
	for i := range n {
		for j := range i {
			worst = max(worst, math.Abs(w[i]-w[j]))
		}
	}
	if worst > bound || worst > 300e-6 {
		t.Fatalf("clocks %v s apart: beyond the bound %v s, or the 3 ms and 150 ppm not undone\n%s", worst, bound, out)
	}
	t.Logf("clocks started 3 ms and 150 ppm apart: %.2f µs apart after 2 s, bound %.2f µs", worst*1e6, bound*1e6)
}
