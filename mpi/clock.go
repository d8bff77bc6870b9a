package mpi

import (
	"encoding/binary"
	"math"
	"slices"
	"time"

	"github.com/tachyon-hpc/tachyon/cvar"
	"github.com/tachyon-hpc/tachyon/engine"
)

// One clock for a job (MPI_WTIME_IS_GLOBAL). The ranks of a Run world
// share their process's clock. The processes of a shared-memory job start
// theirs as the segment creator's (engine's attach, progress.StartSharedClock):
// the same time-stamp counter, origin and frequency. Init then measures
// how far any two ranks' Wtime can disagree, by stamps exchanged with
// rank 0 (Cristian's algorithm: of the round trips, the shortest
// gives each rank's offset, give or take half of it), and WtimeIsGlobal
// is true while that bound is within mpi_wtime_global_bound. Ranks on
// other hosts, or a process whose clock started before Init (a Wtime call
// before it), keep clocks of their own, and the measured bound says so.

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

// measureSkew returns, for the world of p (every rank calls it, as part of
// Init), a bound on how far any two ranks' Wtime disagree: rank 0's
// measurement, which it sends every rank.
func (p *proc) measureSkew() (float64, error) {
	ep := p.ep
	n, me := ep.Size(), ep.Rank()
	const ctx = 1 // World's collective context
	var b [8]byte
	if n == 1 {
		return 0, nil
	}
	if me != 0 {
		// Answer each stamp request (empty) with a stamp, until the
		// bound comes (8 bytes).
		for {
			st, err := ep.Recv(b[:], 0, tagClock, ctx)
			if err != nil {
				return 0, err
			}
			if st.Count == 8 {
				return math.Float64frombits(binary.LittleEndian.Uint64(b[:])), nil
			}
			binary.LittleEndian.PutUint64(b[:], math.Float64bits(Wtime()))
			if err := ep.Send(b[:], 0, tagClock, ctx, engine.Standard); err != nil {
				return 0, err
			}
		}
	}
	// Rank r's clock reads offset[r] more than rank 0's, give or take
	// within[r]: two ranks i and j disagree by at most the two together.
	worst := make([]float64, 0, n-1)
	for r := 1; r < n; r++ {
		best, offset := math.Inf(1), 0.0
		start := Wtime()
		for k := 0; k < skewRounds || best > skewQuick && Wtime()-start < skewBudget; k++ {
			t0 := Wtime()
			if err := ep.Send(nil, r, tagClock, ctx, engine.Standard); err != nil {
				return 0, err
			}
			if _, err := ep.Recv(b[:], r, tagClock, ctx); err != nil {
				return 0, err
			}
			t1 := Wtime()
			if rtt := t1 - t0; rtt < best {
				best, offset = rtt, math.Float64frombits(binary.LittleEndian.Uint64(b[:]))-(t0+t1)/2
			}
		}
		worst = append(worst, math.Abs(offset)+best/2)
	}
	slices.Sort(worst)
	bound := worst[len(worst)-1] // rank 0 and the worst rank
	if len(worst) > 1 {
		bound += worst[len(worst)-2] // two ranks, each off rank 0
	}
	binary.LittleEndian.PutUint64(b[:], math.Float64bits(bound))
	for r := 1; r < n; r++ {
		if err := ep.Send(b[:], r, tagClock, ctx, engine.Standard); err != nil {
			return 0, err
		}
	}
	return bound, nil
}

// WtimeIsGlobal reports the MPI_WTIME_IS_GLOBAL attribute: whether every
// rank of c's job reads one clock, its measured disagreement (WtimeSkew)
// within mpi_wtime_global_bound.
func (c *Comm) WtimeIsGlobal() bool {
	return c != nil && c.p != nil && c.p.skew <= wtimeGlobalBound.Get().Seconds()
}

// WtimeSkew returns the bound, in seconds, on how far two ranks of c's
// job may disagree on Wtime, as Init measured it: 0 for the ranks of a
// Run world, which share their process's clock; +Inf if unknown.
func (c *Comm) WtimeSkew() float64 {
	if c == nil || c.p == nil {
		return math.Inf(1)
	}
	return c.p.skew
}
