package progress

import (
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tachyon-hpc/tachyon/asm"
	"github.com/tachyon-hpc/tachyon/cvar"
)

// The clock behind Wtime, Wtick, the timer wheel and the idle strategy.
//
// Where the CPU has an invariant time-stamp counter, the clock reads it and
// converts counts to seconds with a frequency measured against
// CLOCK_MONOTONIC_RAW when the clock is first used (a least-squares fit over
// a short window, clock_calibration long), or stated exactly by the
// hardware (CPUID leaf 0x15 on x86, CNTFRQ_EL0 on arm64). Elsewhere, or when
// TACHYON_CLOCK=monotonic, it reads the operating system's monotonic clock.

var (
	clockSource = cvar.NewEnum("clock", "auto", []string{"auto", "tsc", "monotonic"},
		"Clock behind Wtime, Wtick and timers: auto uses the time-stamp counter where it is invariant and the monotonic clock otherwise; tsc uses the counter even where the CPU does not report it invariant (for hypervisors that hide the flag; wrong on hardware whose counter really does stop or change rate); monotonic always uses the operating system's monotonic clock.",
		cvar.WithScope(cvar.ScopeReadonly), cvar.WithCategory("clock"))
	clockOrdered = cvar.NewBool("clock_ordered", true,
		"Read the time-stamp counter only after earlier instructions complete (LFENCE;RDTSC), so that Wtime is monotonic across threads that communicate. Turning it off makes a read cheaper (docs/progress.md) but lets a thread read a time earlier than one another thread read before signalling it.",
		cvar.WithScope(cvar.ScopeReadonly), cvar.WithCategory("clock"))
	clockCalibration = cvar.NewDuration("clock_calibration", 15*time.Millisecond,
		"How long the time-stamp counter is measured against CLOCK_MONOTONIC_RAW when the clock starts. Longer is more exact (the error falls as the inverse of this) but delays the first Wtime call.",
		cvar.WithScope(cvar.ScopeReadonly), cvar.WithCategory("clock"), cvar.WithRange(int64(time.Millisecond), int64(time.Second)))
)

// ClockInfo describes the clock behind Wtime.
type ClockInfo struct {
	// Source is "tsc" or "monotonic".
	Source string
	// Frequency is the number of clock counts per second.
	Frequency float64
	// FrequencySource says where Frequency came from: "calibrated",
	// "cpuid-0x15", "hypervisor", "cntfrq" or "nanoseconds".
	FrequencySource string
	// Calibrated is the frequency measured at start, 0 if no measurement
	// was made.
	Calibrated float64
	// Nominal is the frequency the CPU reports about itself, 0 if unknown
	// (informational: on many CPUs the counter does not run at it).
	Nominal float64
	// CalibrationTime is how long the measurement took.
	CalibrationTime time.Duration
	// Ordered reports whether counter reads wait for earlier instructions.
	Ordered bool
	// Resolution is Wtick: the seconds between successive clock values.
	Resolution float64
	// Fallback explains why the time-stamp counter is not used, "" if it is.
	Fallback string
	// Shared reports that the clock is another process's on this host
	// (StartSharedClock): the same origin and frequency.
	Shared bool
}

type clock struct {
	tsc, ordered bool
	tscOrdered   bool    // tsc && ordered
	base         uint64  // counter value at Wtime 0
	secPerCount  float64 // 1/frequency
	countsPerSec float64
	info         ClockInfo
}

var (
	theClock  atomic.Pointer[clock]
	clockOnce sync.Mutex
	monoEpoch = time.Now()
)

// Wtime returns the seconds elapsed since a fixed point in this process's
// past (MPI_WTIME). The point does not change for the life of the process,
// and the value never decreases, on one goroutine or across goroutines and
// OS threads that synchronize with each other. The first call starts the
// clock, which may take clock_calibration (15 ms by default).
func Wtime() float64 {
	// The common case, an ordered counter read, takes no branch on the
	// clock's kind. The line is loaded again after the read: one replaced
	// by a steer meanwhile (SteerClock) may run above its successor, so
	// the read is retried on the new line.
	if c := theClock.Load(); c != nil && c.tscOrdered {
		x := asm.ReadTSCOrdered()
		if theClock.Load() == c {
			return float64(int64(x-c.base)) * c.secPerCount
		}
	}
	return wtimeSlow()
}

func wtimeSlow() float64 {
	for {
		c := clockNow()
		x := c.read()
		if theClock.Load() == c {
			return float64(int64(x-c.base)) * c.secPerCount
		}
	}
}

// Wtick returns the resolution of Wtime in seconds (MPI_WTICK): one count
// of the time-stamp counter, or the resolution the operating system states
// for its monotonic clock.
func Wtick() float64 { return clockNow().info.Resolution }

// Now returns the raw clock count: time-stamp counter cycles, or nanoseconds
// of the monotonic clock. Counts are what the timer wheel runs on; convert
// with CountsToSeconds and SecondsToCounts.
func Now() uint64 { return clockNow().read() }

// NowCoarse is Now without the ordering: on amd64 a plain RDTSC, about
// half the cost, which the CPU may execute a little before the code around
// it. It suits bookkeeping of how long a goroutine has been idle, not
// timestamps compared across goroutines.
func NowCoarse() uint64 { return clockNow().readCoarse() }

// CountsToSeconds converts a difference of Now values to seconds.
func CountsToSeconds(counts uint64) float64 {
	return float64(counts) * clockNow().secPerCount
}

// SecondsToCounts converts seconds to clock counts, rounding up so that a
// deadline computed with it is never early. Negative and NaN inputs give 0;
// inputs too large for the counter saturate.
func SecondsToCounts(s float64) uint64 {
	c := clockNow()
	v := math.Ceil(s * c.countsPerSec)
	switch {
	case !(v > 0):
		return 0
	case v >= math.MaxUint64/2:
		return math.MaxUint64 / 2
	}
	return uint64(v)
}

// Clock describes the clock behind Wtime, starting it if needed.
func Clock() ClockInfo { return clockNow().info }

func clockNow() *clock {
	if c := theClock.Load(); c != nil {
		return c
	}
	return startClock()
}

func (c *clock) readCoarse() uint64 {
	if c.tsc {
		return asm.ReadTSC()
	}
	return uint64(time.Since(monoEpoch))
}

func (c *clock) read() uint64 {
	if c.tsc {
		if c.ordered {
			return asm.ReadTSCOrdered()
		}
		return asm.ReadTSC()
	}
	return uint64(time.Since(monoEpoch))
}

func startClock() *clock {
	clockOnce.Lock()
	defer clockOnce.Unlock()
	if c := theClock.Load(); c != nil {
		return c
	}
	c := newClock(clockSource.Get(), clockOrdered.Get(), clockCalibration.Get())
	theClock.Store(c)
	return c
}

// newClock builds the clock the settings ask for.
func newClock(source string, ordered bool, window time.Duration) *clock {
	if source != "monotonic" {
		why := tscUnusable()
		if source == "tsc" && asm.HasTSC && !strings.HasPrefix(why, "CNTFRQ") {
			why = "" // told to trust a counter the CPU does not vouch for
		}
		if why == "" {
			c, err := newTSCClock(ordered, window)
			if err == nil {
				return c
			}
			why = err.Error()
		}
		c := newMonotonicClock()
		c.info.Fallback = why
		return c
	}
	c := newMonotonicClock()
	c.info.Fallback = "TACHYON_CLOCK=monotonic"
	return c
}

func newMonotonicClock() *clock {
	c := &clock{secPerCount: 1e-9, countsPerSec: 1e9}
	c.base = c.read()
	c.info = ClockInfo{
		Source:          "monotonic",
		Frequency:       1e9,
		FrequencySource: "nanoseconds",
		Ordered:         true,
		Resolution:      monotonicResolution(),
	}
	return c
}

func newTSCClock(ordered bool, window time.Duration) (*clock, error) {
	start := time.Now()
	hz, src := exactFrequency()
	var measured float64
	if hz == 0 || src != "cntfrq" {
		// Measure even when the hardware states a frequency, unless the
		// architecture defines it: stated values are trusted only when
		// the counter agrees with them.
		m, err := calibrate(window)
		if err != nil {
			return nil, err
		}
		measured = m
		if hz == 0 || math.Abs(measured/hz-1) > 100e-6 {
			hz, src = measured, "calibrated"
		}
	}
	if !(hz > 1e6) {
		return nil, fmt.Errorf("time-stamp counter frequency %.0f Hz is implausible", hz)
	}
	c := &clock{tsc: true, ordered: ordered, tscOrdered: ordered, secPerCount: 1 / hz, countsPerSec: hz}
	c.base = c.read()
	c.info = ClockInfo{
		Source:          "tsc",
		Frequency:       hz,
		FrequencySource: src,
		Calibrated:      measured,
		Nominal:         nominalFrequency(),
		CalibrationTime: time.Since(start),
		Ordered:         ordered,
		Resolution:      1 / hz,
	}
	return c, nil
}

// SharedClock returns what another process on this host needs to read the
// same Wtime as this one (StartSharedClock): the counter's value at Wtime
// 0 and its counts per second. Only a time-stamp-counter clock, which
// every CPU of the host reads alike, can be shared; ok is false for the
// monotonic clock. It starts the clock if needed.
func SharedClock() (base uint64, countsPerSec float64, ok bool) {
	c := clockNow()
	return c.base, c.countsPerSec, c.tsc
}

// StartSharedClock starts this process's clock as the one SharedClock
// described in another process of this host, so that both Wtimes read the
// same time: same origin, same frequency (no calibration of its own). It
// reports false, and changes nothing, if the clock has already started
// (Wtime's origin never changes once read), if the counter is not usable
// here, or if the values are implausible.
func StartSharedClock(base uint64, countsPerSec float64) bool {
	clockOnce.Lock()
	defer clockOnce.Unlock()
	if theClock.Load() != nil || !(countsPerSec > 1e6) || clockSource.Get() == "monotonic" {
		return false
	}
	why := tscUnusable()
	if clockSource.Get() == "tsc" && asm.HasTSC && !strings.HasPrefix(why, "CNTFRQ") {
		why = "" // told to trust the counter, as newClock is
	}
	if why != "" {
		return false
	}
	ordered := clockOrdered.Get()
	c := &clock{tsc: true, ordered: ordered, tscOrdered: ordered, base: base, secPerCount: 1 / countsPerSec, countsPerSec: countsPerSec}
	if c.read() < base {
		return false // not this host's counter
	}
	c.info = ClockInfo{
		Source:          "tsc",
		Frequency:       countsPerSec,
		FrequencySource: "shared",
		Nominal:         nominalFrequency(),
		Ordered:         ordered,
		Resolution:      1 / countsPerSec,
		Shared:          true,
	}
	theClock.Store(c)
	return true
}

// calibrate measures the counter's frequency against CLOCK_MONOTONIC_RAW.
//
// Each sample brackets one reading of the reference clock between two
// counter reads and is placed at their midpoint. Samples whose bracket is
// wide (the thread was preempted or the read was slow) are dropped, and a
// least-squares line through the rest gives counts per nanosecond. Over a
// 15 ms window with thousands of samples the slope is good to well under a
// part per million here, where two endpoint readings alone would be off by
// several.
func calibrate(window time.Duration) (float64, error) {
	type sample struct {
		mid, width uint64
		ns         int64
	}
	samples := make([]sample, 0, 1<<14)
	first := monotonicRaw()
	for len(samples) < cap(samples) {
		t0 := asm.ReadTSCOrdered()
		ns := monotonicRaw()
		t1 := asm.ReadTSCOrdered()
		if t1 <= t0 {
			return 0, fmt.Errorf("time-stamp counter went backwards during calibration")
		}
		samples = append(samples, sample{mid: t0 + (t1-t0)/2, width: t1 - t0, ns: ns})
		if time.Duration(ns-first) >= window {
			break
		}
	}
	if len(samples) < 16 {
		return 0, fmt.Errorf("clock calibration took only %d samples", len(samples))
	}
	// Keep the narrowest brackets: everything within twice the median.
	widths := make([]uint64, len(samples))
	for i, s := range samples {
		widths[i] = s.width
	}
	limit := 2 * quickMedian(widths)
	var n, sx, sy, sxx, sxy float64
	x0, y0 := samples[0].mid, samples[0].ns
	for _, s := range samples {
		if s.width > limit {
			continue
		}
		x := float64(s.mid - x0)
		y := float64(s.ns - y0)
		n++
		sx += x
		sy += y
		sxx += x * x
		sxy += x * y
	}
	den := n*sxx - sx*sx
	if n < 16 || den <= 0 {
		return 0, fmt.Errorf("clock calibration kept too few samples (%v of %d)", n, len(samples))
	}
	nsPerCount := (n*sxy - sx*sy) / den
	if !(nsPerCount > 0) {
		return 0, fmt.Errorf("clock calibration found a non-increasing counter")
	}
	return 1e9 / nsPerCount, nil
}

// quickMedian returns the median of v, reordering it.
func quickMedian(v []uint64) uint64 {
	k := len(v) / 2
	lo, hi := 0, len(v)-1
	for lo < hi {
		p := v[(lo+hi)/2]
		i, j := lo, hi
		for i <= j {
			for v[i] < p {
				i++
			}
			for v[j] > p {
				j--
			}
			if i <= j {
				v[i], v[j] = v[j], v[i]
				i++
				j--
			}
		}
		switch {
		case k <= j:
			hi = j
		case k >= i:
			lo = i
		default:
			return v[k]
		}
	}
	return v[k]
}
