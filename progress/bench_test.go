package progress

import (
	"slices"
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
// (starting 20 ms out, after all are armed) and
// polls until all have fired, reporting how late each was seen complete
// after its due time (p50, p99, max) and counting early completions.
func BenchmarkTimerLateness(b *testing.B) {
	e := newEngine(b)
	const n = 10_000
	late := make([]float64, 0, n*b.N)
	early := 0
	rs := make([]*TimerRequest, n)
	for b.Loop() {
		for i := range rs {
			r, err := e.NewTimer(20e-3 + float64(i)*10e-6)
			if err != nil {
				b.Fatal(err)
			}
			rs[i] = r
		}
		for i := 0; i < n; {
			e.Progress()
			now := Now()
			for ; i < n && rs[i].Done(); i++ {
				due := rs[i].t.Due()
				if now < due {
					early++
				}
				late = append(late, CountsToSeconds(now-due)*1e6)
			}
		}
	}
	slices.Sort(late)
	q := func(p float64) float64 { return late[int(p*float64(len(late)-1))] }
	b.ReportMetric(q(0.5), "p50-us")
	b.ReportMetric(q(0.99), "p99-us")
	b.ReportMetric(late[len(late)-1], "max-us")
	b.ReportMetric(float64(early), "early")
	if early > 0 {
		b.Errorf("%d timers completed before their due time", early)
	}
}

func BenchmarkProgressIdle(b *testing.B) {
	e := newEngine(b)
	e.Register(&countPoller{})
	for b.Loop() {
		e.Progress()
	}
}

func BenchmarkTimerCreateCancel(b *testing.B) {
	e := newEngine(b)
	for b.Loop() {
		r, _ := e.NewTimer(10)
		r.Cancel()
	}
}
