package nic

import "fmt"

// Faults are what a link does wrong on purpose to the frames it
// receives, so that the reliable transport above it can be tested
// against a network that loses, repeats and reorders: each a probability
// in [0, 1] applied to every frame.
type Faults struct {
	Drop      float64 // the frame is lost
	Duplicate float64 // the frame arrives twice
	Reorder   float64 // the frame arrives after the one behind it
}

func (f Faults) check() error {
	for _, p := range []float64{f.Drop, f.Duplicate, f.Reorder} {
		if !(p >= 0 && p <= 1) {
			return fmt.Errorf("%w: fault probability %v is not in [0, 1]", ErrConfig, p)
		}
	}
	return nil
}

// WithFaults returns a link that receives through l and then drops,
// duplicates and reorders frames as f says, deterministically for a seed.
// A duplicate is a copy in a frame of l's own, released like any other;
// a frame held back to be reordered comes after the next one received,
// or after eight Receive calls that find nothing, so that nothing is
// held for ever. Everything else is l's. The control variables
// nic_dup_rate and nic_reorder_rate make Open return such a link.
func WithFaults(l Link, f Faults, seed uint64) (Link, error) {
	if err := f.check(); err != nil {
		return nil, err
	}
	return &faulty{Link: l, f: f, rng: injector(seed | 1),
		drop: threshold(f.Drop), dup: threshold(f.Duplicate), reorder: threshold(f.Reorder)}, nil
}

// faulty is WithFaults' link.
type faulty struct {
	Link
	f                  Faults
	drop, dup, reorder uint64 // thresholds of random numbers in [0, 2^32)
	rng                injector

	in      []RxDesc // what the link received, before the faults
	held    RxDesc   // a frame held back to be reordered
	holding bool
	idle    int // Receive calls that found nothing while holding
	rel     [1]Frame
	fs      [1]Frame
	stats   faultStats
}

type faultStats struct{ dropped, duplicated, reordered uint64 }

// threshold is the bound below which a random number of an injector
// stands for an event of probability p.
func threshold(p float64) uint64 { return uint64(p * (1 << 32)) }

// injector is the random source of fault injection: xorshift64*, whose
// next returns numbers in [0, 2^32). The state must not be 0.
type injector uint64

func (r *injector) next() uint64 {
	x := uint64(*r)
	x ^= x >> 12
	x ^= x << 25
	x ^= x >> 27
	*r = injector(x)
	return (x * 2685821657736338717) >> 32
}

func (l *faulty) Receive(rx []RxDesc) int {
	if len(rx) == 0 {
		return 0
	}
	// What comes is read into a batch of its own, half rx's size, so
	// that the duplicates and the held frame fit beside it in rx.
	if cap(l.in) < len(rx) {
		l.in = make([]RxDesc, len(rx))
	}
	in := l.in[:max(1, len(rx)/2)]
	n := l.Link.Receive(in)
	out := 0
	for i := 0; i < n; i++ {
		d := in[i]
		if l.drop != 0 && l.rng.next() < l.drop {
			l.rel[0] = d.Frame
			l.Link.Release(l.rel[:])
			l.stats.dropped++
			pvInjected.Add(1)
			continue
		}
		if l.reorder != 0 && !l.holding && l.rng.next() < l.reorder {
			l.held, l.holding, l.idle = d, true, 0
			l.stats.reordered++
			pvReordered.Add(1)
			continue
		}
		rx[out] = d
		out++
		if l.holding && out < len(rx) {
			rx[out] = l.held
			out++
			l.holding = false
		}
		if l.dup != 0 && out < len(rx) && l.rng.next() < l.dup && l.Link.Alloc(l.fs[:]) == 1 {
			b := l.Link.Bytes(l.fs[0])
			k := copy(b, d.Data)
			rx[out] = RxDesc{Frame: l.fs[0], Data: b[:k], From: d.From}
			out++
			l.stats.duplicated++
			pvDuplicated.Add(1)
		}
	}
	if out == 0 && l.holding {
		if l.idle++; l.idle >= 8 {
			rx[0] = l.held
			l.holding = false
			return 1
		}
	}
	return out
}

// Release gives back what it is given, as l does; the duplicates are
// frames l allocated, which its Release takes as well.
func (l *faulty) Release(fs []Frame) error { return l.Link.Release(fs) }

// SetDropRate sets the drop probability of the injector, leaving l's own
// (an XDP link's program) as it is.
func (l *faulty) SetDropRate(p float64) error {
	f := l.f
	f.Drop = p
	if err := f.check(); err != nil {
		return err
	}
	l.f, l.drop = f, threshold(p)
	return nil
}

func (l *faulty) Stats() Stats {
	s := l.Link.Stats()
	s.DropInjected += l.stats.dropped
	s.Duplicated += l.stats.duplicated
	s.Reordered += l.stats.reordered
	return s
}

func (l *faulty) Close() error {
	if l.holding {
		l.rel[0] = l.held.Frame
		l.Link.Release(l.rel[:])
		l.holding = false
	}
	return l.Link.Close()
}
