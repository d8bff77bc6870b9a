package mpi

import (
	"encoding/binary"
	"math"
	"slices"
	"time"

	"github.com/tachyon-hpc/tachyon/cvar"
	"github.com/tachyon-hpc/tachyon/engine"
	"github.com/tachyon-hpc/tachyon/progress"
)

// One clock for a job (MPI_WTIME_IS_GLOBAL). The ranks of a Run world
// share their process's clock. The processes of a shared-memory job start
// theirs as the segment creator's (engine's attach, progress.StartSharedClock):
// the same time-stamp counter, origin and frequency. Ranks on other hosts,
// or a process whose clock started before Init (a Wtime call before it),
// have clocks of their own: Init aligns them, and the network keeps them
// aligned.
//
// Init, in measureSkew: rank 0 measures every rank's offset from its own
// Wtime by stamps exchanged (Cristian's algorithm: of the round trips,
// the shortest gives the offset, give or take half of it). The ranks that
// share a clock (the same counter line) form one group; every group but
// the one furthest ahead steps its clock forward to it (Wtime never goes
// back), each rank of a group by the same amount, so that a group stays
// one clock. Rank 0 then measures again, and the worst two offsets bound
// how far any two ranks' Wtimes disagree. Each rank whose clock is not
// rank 0's then steers it toward rank 0's for the rest of the job, over
// the network (engine's SteerClock: offset and drift, re-estimated every
// engine_net_clock_interval), and the bound follows what that measures. A
// clock apart from rank 0's on rank 0's host (its process read Wtime before
// Init) is aligned, but nothing follows its drift: the bound is +Inf.
// WtimeIsGlobal is true while the bound is within mpi_wtime_global_bound.

var wtimeGlobalBound = cvar.NewDuration("mpi_wtime_global_bound", time.Microsecond,
	"Largest measured disagreement between two ranks' Wtime for which WtimeIsGlobal (the MPI_WTIME_IS_GLOBAL attribute) reports true.",
	cvar.WithCategory("mpi"), cvar.WithRange(0, int64(time.Hour)))

// Init's stamp exchanges with each rank: at least skewRounds, then more,
// for at most skewBudget seconds, until one round trip took no more than
// skewQuick (ranks that share CPUs wait for each other's turn, and only a
// quick round trip bounds the offset closely).
const (
	skewRounds = 8
	skewQuick  = 2e-6 // seconds
	skewBudget = 2e-3 // seconds a rank
)

// Init's clock messages from rank 0: a stamp request (empty), answered
// with a stamp (clockStamp bytes: Wtime, the clock line's base and counts
// a second, whether it is a time-stamp counter); and orders (16 bytes: a
// value, then its kind).
const (
	clockStamp = 32
	orderStep  = 1 // step the clock forward by the value
	orderBound = 2 // the bound: Init's measurement is done
	orderSteer = 3 // the bound, and steer toward rank 0's clock over the network
)

// clockOf is one rank's clock, as rank 0 measured it: its offset from rank
// 0's Wtime (give or take rtt/2) and the line it follows.
type clockOf struct {
	offset, rtt float64
	base        uint64
	hz          float64
	tsc         bool
}

// sameLine reports whether two ranks follow one clock line (a host's
// shared time-stamp counter clock): steps keep them together.
func (a clockOf) sameLine(b clockOf) bool { return a.tsc && b.tsc && a.base == b.base && a.hz == b.hz }

// measureSkew aligns the clocks of p's world and returns a bound on how
// far any two ranks' Wtime disagree: rank 0's measurement, which it sends
// every rank. Every rank calls it, as part of Init.
func (p *proc) measureSkew() (float64, error) {
	ep := p.ep
	n, me := ep.Size(), ep.Rank()
	if n == 1 {
		return 0, nil
	}
	if me != 0 {
		return p.answerSkew()
	}
	clocks, err := p.measureClocks()
	if err != nil {
		return 0, err
	}
	// Step every group behind the one furthest ahead forward to it.
	ahead := 0.0
	for _, c := range clocks {
		ahead = max(ahead, c.offset)
	}
	step := make([]float64, n)
	stepped := false
	for r, c := range clocks {
		for g, lead := range clocks[:r+1] {
			if lead.sameLine(c) || g == r {
				step[r] = ahead - lead.offset // the group's first rank's measure, for all of it
				break
			}
		}
		stepped = stepped || step[r] > c.rtt/2
	}
	if stepped {
		for r := 1; r < n; r++ {
			if err := p.orderClock(r, orderStep, step[r]); err != nil {
				return 0, err
			}
		}
		progress.StepClock(step[0])
		if clocks, err = p.measureClocks(); err != nil {
			return 0, err
		}
	}
	worst := make([]float64, 0, n-1)
	for _, c := range clocks[1:] {
		worst = append(worst, math.Abs(c.offset)+c.rtt/2)
	}
	slices.Sort(worst)
	bound := worst[len(worst)-1] // rank 0 and the worst rank
	if len(worst) > 1 {
		bound += worst[len(worst)-2] // two ranks, each off rank 0
	}
	// A clock apart from rank 0's is steered over the network; one that
	// shares memory with rank 0 (its process read Wtime before Init) is
	// not, and nothing follows its drift: no bound holds.
	order := make([]int, n)
	for r := 1; r < n; r++ {
		switch {
		case clocks[r].sameLine(clocks[0]):
			order[r] = orderBound
		case ep.OverNetwork(r):
			order[r] = orderSteer
		default:
			order[r] = orderBound
			bound = math.Inf(1)
		}
	}
	for r := 1; r < n; r++ {
		if err := p.orderClock(r, order[r], bound); err != nil {
			return 0, err
		}
	}
	return bound, nil
}

// measureClocks is rank 0's measurement of every rank's clock (its own
// first, offset 0).
func (p *proc) measureClocks() ([]clockOf, error) {
	ep := p.ep
	n := ep.Size()
	const ctx = 1 // World's collective context
	clocks := make([]clockOf, n)
	clocks[0] = ownClock(0)
	var b [clockStamp]byte
	for r := 1; r < n; r++ {
		best := math.Inf(1)
		start := Wtime()
		for k := 0; k < skewRounds || best > skewQuick && Wtime()-start < skewBudget; k++ {
			t0 := Wtime()
			if err := ep.Send(nil, r, tagClock, ctx, engine.Standard); err != nil {
				return nil, err
			}
			if _, err := ep.Recv(b[:], r, tagClock, ctx); err != nil {
				return nil, err
			}
			t1 := Wtime()
			if rtt := t1 - t0; rtt < best {
				best = rtt
				clocks[r] = clockOf{
					offset: math.Float64frombits(binary.LittleEndian.Uint64(b[:])) - (t0+t1)/2,
					rtt:    rtt,
					base:   binary.LittleEndian.Uint64(b[8:]),
					hz:     math.Float64frombits(binary.LittleEndian.Uint64(b[16:])),
					tsc:    b[24] == 1,
				}
			}
		}
	}
	return clocks, nil
}

// ownClock is this process's clock as a stamp describes it, at Wtime w.
func ownClock(w float64) clockOf {
	base, hz, tsc := progress.SharedClock()
	return clockOf{offset: w, base: base, hz: hz, tsc: tsc}
}

// orderClock sends rank r an order of kind with value v.
func (p *proc) orderClock(r, kind int, v float64) error {
	var b [16]byte
	binary.LittleEndian.PutUint64(b[:], math.Float64bits(v))
	binary.LittleEndian.PutUint64(b[8:], uint64(kind))
	return p.ep.Send(b[:], r, tagClock, 1, engine.Standard)
}

// answerSkew is measureSkew on a rank other than 0: it answers stamp
// requests and follows orders until the bound comes.
func (p *proc) answerSkew() (float64, error) {
	ep := p.ep
	const ctx = 1
	var b [clockStamp]byte
	for {
		st, err := ep.Recv(b[:16], 0, tagClock, ctx)
		if err != nil {
			return 0, err
		}
		if st.Count == 0 {
			c := ownClock(Wtime())
			binary.LittleEndian.PutUint64(b[:], math.Float64bits(c.offset))
			binary.LittleEndian.PutUint64(b[8:], c.base)
			binary.LittleEndian.PutUint64(b[16:], math.Float64bits(c.hz))
			b[24] = 0
			if c.tsc {
				b[24] = 1
			}
			if err := ep.Send(b[:], 0, tagClock, ctx, engine.Standard); err != nil {
				return 0, err
			}
			continue
		}
		v := math.Float64frombits(binary.LittleEndian.Uint64(b[:]))
		switch binary.LittleEndian.Uint64(b[8:]) {
		case orderStep:
			progress.StepClock(v)
		case orderSteer:
			if err := ep.SteerClock(0); err != nil {
				return 0, err
			}
			return v, nil
		default:
			return v, nil
		}
	}
}

// WtimeIsGlobal reports the MPI_WTIME_IS_GLOBAL attribute: whether every
// rank of c's job reads one clock, its measured disagreement (WtimeSkew)
// within mpi_wtime_global_bound.
func (c *Comm) WtimeIsGlobal() bool {
	return c != nil && c.p != nil && c.p.skew <= wtimeGlobalBound.Get().Seconds()
}

// WtimeSkew returns the bound, in seconds, on how far two ranks of c's
// job may disagree on Wtime: as the clock probes of a job across hosts
// last measured it, else as Init did; 0 for the ranks of a Run world,
// which share their process's clock; +Inf if unknown.
func (c *Comm) WtimeSkew() float64 {
	if c == nil || c.p == nil {
		return math.Inf(1)
	}
	if c.p.ep != nil {
		if b, ok := c.p.ep.ClockBound(); ok {
			return b
		}
	}
	return c.p.skew
}
