package progress

import (
	"slices"
	"sync/atomic"
	"testing"
	"time"
)

var sinkF float64
var sinkT time.Time

func BenchmarkWtime(b *testing.B) {
	Wtime()
	for b.Loop() {
		sinkF = Wtime()
	}
}

func BenchmarkTimeNow(b *testing.B) {
	for b.Loop() {
		sinkT = time.Now()
	}
}

// BenchmarkWtimeVsTimeNow times Wtime and time.Now in alternating rounds of
// the same run, and reports both and their ratio: the machine is shared, so
// only a ratio taken side by side means much.
func BenchmarkWtimeVsTimeNow(b *testing.B) {
	Wtime()
	const round = 1000
	var wt, tn time.Duration
	for b.Loop() {
		t0 := time.Now()
		for range round {
			sinkF = Wtime()
		}
		t1 := time.Now()
		for range round {
			sinkT = time.Now()
		}
		t2 := time.Now()
		wt += t1.Sub(t0)
		tn += t2.Sub(t1)
	}
	n := float64(b.N) * round
	b.ReportMetric(float64(wt.Nanoseconds())/n, "ns/Wtime")
	b.ReportMetric(float64(tn.Nanoseconds())/n, "ns/time.Now")
	b.ReportMetric(float64(wt)/float64(tn), "Wtime/time.Now")
}

// BenchmarkWtimeUnordered is Wtime with clock_ordered=false.
func BenchmarkWtimeUnordered(b *testing.B) {
	c := *clockNow()
	c.ordered = false
	for b.Loop() {
		sinkF = float64(int64(c.read()-c.base)) * c.secPerCount
	}
}

func BenchmarkWtick(b *testing.B) {
	for b.Loop() {
		sinkF = Wtick()
	}
}

// BenchmarkTimerLateness arms 10,000 timers due every 10 us over 100 ms
// (starting 20 ms out, after all are armed) and polls until all have fired,
// reporting how late each was seen complete after its due time (p50, p99,
// max) and counting early completions.
//
// Beside it, the same loop's floor: how late a perfect timer would be seen,
// namely at the end of the first poll that started after its due time.
// On a VM whose host takes the CPU away for tens of microseconds at a time
// that floor, not the wheel, sets the tail. "missed" counts timers seen
// later than the floor (a poll that should have fired them did not); it
// must be 0.
func BenchmarkTimerLateness(b *testing.B) {
	e := newEngine(b)
	const n = 10_000
	var late, floor []float64
	early, missed := 0, 0
	rs := make([]*TimerRequest, n)
	dues := make([]uint64, n)
	for b.Loop() {
		for i := range rs {
			r, err := e.NewTimer(20e-3 + float64(i)*10e-6)
			if err != nil {
				b.Fatal(err)
			}
			rs[i], dues[i] = r, r.t.Due()
		}
		for i, j := 0, 0; i < n; {
			start := Now()
			e.Progress()
			now := Now()
			for ; j < n && dues[j] <= start; j++ {
				floor = append(floor, CountsToSeconds(now-dues[j])*1e6)
			}
			for ; i < n && rs[i].Done(); i++ {
				if now < dues[i] {
					early++
				}
				late = append(late, CountsToSeconds(now-dues[i])*1e6)
			}
			if i < j {
				missed += j - i // due before this poll started, still not complete
			}
		}
	}
	slices.Sort(late)
	slices.Sort(floor)
	q := func(v []float64, p float64) float64 { return v[int(p*float64(len(v)-1))] }
	b.ReportMetric(q(late, 0.5), "p50-us")
	b.ReportMetric(q(late, 0.99), "p99-us")
	b.ReportMetric(late[len(late)-1], "max-us")
	b.ReportMetric(q(floor, 0.5), "floor-p50-us")
	b.ReportMetric(q(floor, 0.99), "floor-p99-us")
	b.ReportMetric(float64(early), "early")
	b.ReportMetric(float64(missed), "missed")
	if early > 0 || missed > 0 {
		b.Errorf("%d timers completed before their due time, %d not fired by the first poll after it", early, missed)
	}
}

// BenchmarkPollGaps measures the machine itself: it reads the clock in a
// tight loop for 100 ms per iteration and reports the share of time lost in
// gaps over 5 us (the host or kernel taking the CPU away) and their p99, the
// floor under any polling loop's tail latency.
func BenchmarkPollGaps(b *testing.B) {
	Now()
	var gaps []float64
	var lost, total float64
	for b.Loop() {
		end := Now() + SecondsToCounts(0.1)
		last := Now()
		first := last
		for last < end {
			now := Now()
			if d := CountsToSeconds(now-last) * 1e6; d > 5 {
				gaps = append(gaps, d)
				lost += d
			}
			last = now
		}
		total += CountsToSeconds(last-first) * 1e6
	}
	slices.Sort(gaps)
	b.ReportMetric(float64(len(gaps))/(total/1e6), "gaps/s")
	b.ReportMetric(100*lost/total, "%lost")
	if len(gaps) > 0 {
		b.ReportMetric(gaps[int(0.99*float64(len(gaps)-1))], "gap-p99-us")
	}
}

func BenchmarkProgressIdle(b *testing.B) {
	e := newEngine(b)
	e.Register(&countPoller{})
	for b.Loop() {
		e.Progress()
	}
}

// BenchmarkWaitEmptyPolls is a Wait that the 16th poll completes: 15
// empty polls through the idle back-off's spin phase (its clock reads
// every spinClockEvery polls), then the return.
func BenchmarkWaitEmptyPolls(b *testing.B) {
	e := newEngine(b, WithIdle(time.Hour, time.Hour, time.Minute))
	var c Completion
	e.Register(&lazyPoller{e: e, c: &c, n: coarseEvery})
	for b.Loop() {
		c.Rearm()
		e.Wait(&c)
	}
}

func BenchmarkTimerCreateCancel(b *testing.B) {
	e := newEngine(b)
	for b.Loop() {
		r, _ := e.NewTimer(10)
		r.Cancel()
	}
}

// BenchmarkWtimeSteered times Wtime in alternating rounds: a clock left
// alone, and one that another goroutine steers (SteerClock) every
// millisecond, a thousand times as often as a job across hosts does. A
// steer replaces the line Wtime reads, so the two should cost the same.
func BenchmarkWtimeSteered(b *testing.B) {
	Wtime()
	_, hz, _ := SharedClock()
	var steer, stop atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		for !stop.Load() {
			if steer.Load() {
				SteerClock(Now(), Wtime()+1e-7, 0, 1/hz, 1)
			}
			time.Sleep(time.Millisecond)
		}
	}()
	const round = 100000
	var alone, steered time.Duration
	for b.Loop() {
		for i, d := range []*time.Duration{&alone, &steered} {
			steer.Store(i == 1)
			t0 := time.Now()
			for range round {
				sinkF = Wtime()
			}
			*d += time.Since(t0)
		}
	}
	stop.Store(true)
	<-done
	n := float64(b.N) * round
	b.ReportMetric(float64(alone.Nanoseconds())/n, "ns/Wtime")
	b.ReportMetric(float64(steered.Nanoseconds())/n, "ns/steered-Wtime")
}
