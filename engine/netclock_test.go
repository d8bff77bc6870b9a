package engine

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/tachyon-hpc/tachyon/progress"
)

// TestNetClock: a rank steering its clock toward rank 0's over the
// network probes it in rounds, corrects its Wtime from each, and both it
// and the reference come to know a bound on their skew. (One process has
// one clock, so the gap found is the measurement's own error: the bound
// must cover it.) Wtime never goes back meanwhile. Only a network peer
// can be a reference.
func TestNetClock(t *testing.T) {
	w := netWorld(t, 3, "engine_net_clock_interval", "20ms")
	defer closeWorld(t, w)
	a, b := w.Endpoint(0), w.Endpoint(1)
	for _, ref := range []int{-1, 1, 3} {
		if err := b.SteerClock(ref); !errors.Is(err, ErrConfig) {
			t.Fatalf("SteerClock(%d) on rank 1: %v, want ErrConfig", ref, err)
		}
	}
	if _, ok := b.ClockBound(); ok {
		t.Fatal("a bound before any clock probe")
	}
	probes, steers := pvNetClockProbes.Value(), pvNetClockSteers.Value()
	if err := b.SteerClock(0); err != nil {
		t.Fatal(err)
	}
	last := progress.Wtime()
	deadline := time.Now().Add(10 * time.Second)
	for pvNetClockSteers.Value()-steers < 8 {
		if time.Now().After(deadline) {
			t.Fatalf("%d clock probes, %d corrections in 10 s", pvNetClockProbes.Value()-probes, pvNetClockSteers.Value()-steers)
		}
		for range 1000 {
			if now := progress.Wtime(); now < last {
				t.Fatalf("Wtime went back from %v to %v", last, now)
			} else {
				last = now
			}
		}
		time.Sleep(time.Millisecond) // the keepers run the rounds of idle endpoints
	}
	if n := pvNetClockProbes.Value() - probes; n < 8*clockProbes {
		t.Fatalf("%d probes for 8 rounds of %d", n, clockProbes)
	}
	for _, ep := range []*Endpoint{a, b} {
		bound, ok := ep.ClockBound()
		if !ok || !(bound > 0 && bound < 10e-3) {
			t.Fatalf("rank %d: bound %v, %v", ep.Rank(), bound, ok)
		}
	}
	if _, ok := w.Endpoint(2).ClockBound(); ok {
		t.Fatal("rank 2, neither steering nor probed, has a bound")
	}
	if k := &b.net.clk; k.err > 10e-3 || k.kept == 0 {
		t.Fatalf("rank 1's error %v over %d samples", k.err, k.kept)
	}
}

// TestClockFit: the line through samples of a clock 3 ms ahead and 100 ppm
// fast, with ±2 µs of noise, gives its offset and rate back once the
// samples span clockSpan; before that, the offset at this clock's rate;
// and says how far it passes from the newest sample.
func TestClockFit(t *testing.T) {
	spc := 1 / progress.Clock().Frequency
	const offset, drift = 3e-3, 100e-6
	x0 := uint64(1 << 40)
	ref := func(x uint64, i int) float64 {
		noise := float64(i%5-2) * 1e-6
		return float64(x-x0)*spc*(1+drift) + offset + noise
	}
	var k netClock
	step := uint64(0.11 / spc) // samples 0.11 s apart
	for i := range clockKeep {
		x := x0 + uint64(i)*step
		k.samples[i] = clockSample{x: x, rtt: 1000, ref: ref(x, i)}
		k.kept = i + 1
		at, r, dev, rate, _ := k.fit()
		if want := math.Abs(r - k.samples[i].ref); math.Abs(dev-want) > 1e-12 {
			t.Fatalf("%d samples: the line %v s from the newest sample, reported %v", k.kept, want, dev)
		}
		if at != x {
			t.Fatalf("%d samples: the line is at %d, want the newest sample's %d", k.kept, at, x)
		}
		if k.kept < 6 { // under clockSpan
			if rate != spc || r != k.samples[i].ref {
				t.Fatalf("%d samples: rate %v and ref %v, want this clock's %v through the newest", k.kept, rate, r, spc)
			}
			continue
		}
		if d := rate/spc - 1 - drift; d > 5e-6 || d < -5e-6 {
			t.Fatalf("%d samples: rate off by %v", k.kept, d)
		}
		if d := r - (float64(x-x0)*spc*(1+drift) + offset); d > 2e-6 || d < -2e-6 {
			t.Fatalf("%d samples: reference off by %v", k.kept, d)
		}
	}
}
