package progress

import (
	"math"

	"github.com/tachyon-hpc/tachyon/cvar"
	"github.com/tachyon-hpc/tachyon/pvar"
)

// Steering Wtime toward another process's clock, for a job whose ranks on
// different hosts read one time (MPI_WTIME_IS_GLOBAL). Wtime is a line
// through the raw counter, (count - base) × secPerCount; a correction
// replaces the line with another, published with one pointer store, so
// Wtime costs one more load: it checks after reading the counter that the
// line it used is still current. Corrections never make Wtime go back: StepClock
// moves it forward only, and SteerClock changes its rate (by at most
// clock_slew_max) from a point where the new line is at or above the old.

var clockSlewMax = cvar.NewFloat("clock_slew_max", 500e-6,
	"Largest fraction by which steering toward another host's clock (a job across hosts) may speed up or slow down Wtime: 500e-6 closes a gap of 0.5 ms a second. Wtime never steps back, so a clock ahead of the job's slews back at this rate.",
	cvar.WithCategory("clock"), cvar.WithScope(cvar.ScopeReadonly))

var pvLateSteers = pvar.NewCounter("progress_clock_late_steers",
	"Slowing steers of Wtime (SteerClock) whose thread was descheduled between computing the new line and publishing it, past the point where the new line meets the old; each was published again from the time it found. Wtime read in the nanoseconds between the two may have gone back by up to the delay × the rate change (docs/progress.md).",
	pvar.WithUnit("steers"))

// steerLead is how far ahead of now a slowing line meets the old, in
// seconds: every count before that knot reads no earlier on the new line
// than on the old, so a Wtime that read the counter on the old line before
// the new one was published (Wtime retries a read that straddles the
// publication) reads no later than any Wtime after it. SteerClock publishes
// a slowing line only while the counter is at least steerLead/2 before the
// knot, and publishes again from now if it finds the counter past the knot
// after the store (the steering thread descheduled in between). What is
// left: a Wtime on the late line in the nanoseconds before the second
// store may read earlier than one on the old line did. The price is a step
// forward of at most steerLead × clock_slew_max (0.5 µs) when the rate
// drops.
const steerLead = 1e-3

// StepClock moves Wtime forward by d seconds at once; d <= 0 (or NaN)
// changes nothing, since Wtime never goes back. It starts the clock if
// needed.
func StepClock(d float64) {
	if !(d > 0) {
		return
	}
	clockOnce.Lock()
	defer clockOnce.Unlock()
	c := *clockNow()
	c.base -= uint64(math.Ceil(d * c.countsPerSec))
	theClock.Store(&c)
}

// SteerClock steers Wtime toward a clock that reads ref, give or take
// unc seconds, at raw count at (Now), and advances secPerCount seconds a
// count: Wtime's rate changes so that the gap closes within horizon
// seconds, by clock_slew_max at most; of a gap ahead of Wtime larger than
// that, what is certain (the gap less unc) closes at once, with a step
// forward (a step cannot be undone, so none rests on the uncertain part).
// It returns the gap before the correction: the other clock less Wtime,
// now. Nothing changes, and the gap is NaN, if the arguments are not
// plausible (a rate more than 1% off this clock's).
func SteerClock(at uint64, ref, unc, secPerCount, horizon float64) float64 {
	clockOnce.Lock()
	defer clockOnce.Unlock()
	old := clockNow()
	nominal := 1 / old.info.Frequency
	if !(math.Abs(secPerCount/nominal-1) < 0.01) || !(horizon > 0) || !(unc >= 0) || math.IsNaN(ref) || math.IsInf(ref, 0) {
		return math.NaN()
	}
	for {
		c, knot, gap := steerLine(old, at, ref, unc, secPerCount, horizon)
		slower := c.secPerCount < old.secPerCount
		if slower && old.read() >= knot-uint64(steerLead/2*old.countsPerSec) {
			continue // too close to the knot to publish: start again from now
		}
		theClock.Store(c)
		if slower && old.read() >= knot {
			// Descheduled between the check and the store: Wtime may
			// have read the old line past the knot, above this one.
			// Publish again from now, at or above the old line.
			pvLateSteers.Add(1)
			continue
		}
		return gap
	}
}

// steerLine computes SteerClock's new line from the old, as of now: the
// line, the knot where it meets the old, and the gap it closes.
func steerLine(old *clock, at uint64, ref, unc, secPerCount, horizon float64) (*clock, uint64, float64) {
	now := old.read()
	gap := ref + float64(int64(now-at))*secPerCount - old.at(now)
	slew := clockSlewMax.Get()
	step := 0.0
	if gap-unc > slew*horizon {
		step = gap - unc // far behind: jump what is certain, slew the rest
	}
	rate := max(-slew, min(slew, (gap-step)/horizon))
	c := *old
	c.secPerCount = secPerCount * (1 + rate)
	c.countsPerSec = 1 / c.secPerCount
	// The new line meets the old at a knot: now if it runs faster (every
	// later count reads later on it), steerLead ahead if slower (every
	// count before the knot reads later on it).
	knot := now
	if c.secPerCount < old.secPerCount {
		knot += uint64(steerLead * old.countsPerSec)
	}
	v := old.at(knot) + step
	c.base = knot - uint64(math.Ceil(v*c.countsPerSec))
	for c.at(knot) < v {
		c.base-- // rounding: at the knot the new line reads no earlier
	}
	return &c, knot, gap
}

// at is Wtime at raw count x on line c.
func (c *clock) at(x uint64) float64 { return float64(int64(x-c.base)) * c.secPerCount }

// SlewMax returns clock_slew_max: the largest fraction by which SteerClock
// changes Wtime's rate from the one it steers toward.
func SlewMax() float64 { return clockSlewMax.Get() }
