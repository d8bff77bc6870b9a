package mpi

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tachyon-hpc/tachyon/cvar"
	"github.com/tachyon-hpc/tachyon/internal/testskip"
)

// collNonblocking starts several nonblocking collectives at once, with
// point-to-point requests and a timer among them, and completes them with
// Waitall, Waitany and Testsome.
func collNonblocking(c *Comm) error {
	n, r := c.Size(), c.Rank()
	const m = 64
	for round := range 3 {
		bb := make([]int64, m)
		if r == 0 {
			bb = vec(round, m)
		}
		rb, err := Ibcast(c, bb, 0)
		if err != nil {
			return err
		}
		sum := make([]float64, m)
		ra, err := Iallreduce(c, slices.Repeat([]float64{float64(r + 1)}, m), sum, Sum)
		if err != nil {
			return err
		}
		ag := make([]int32, n)
		rg, err := Iallgather(c, []int32{int32(r * 10)}, ag)
		if err != nil {
			return err
		}
		rx, err := c.Ibarrier()
		if err != nil {
			return err
		}
		a2 := make([]int64, n)
		send := make([]int64, n)
		for k := range send {
			send[k] = int64(r*100 + k)
		}
		rt, err := Ialltoall(c, send, a2)
		if err != nil {
			return err
		}
		// A ring of point-to-point messages and a timer beside them.
		in := make([]byte, 4)
		pr, err := c.Irecv(in, (r-1+n)%n, round)
		if err != nil {
			return err
		}
		ps, err := c.Isend([]byte{1, 2, 3, 4}, (r+1)%n, round)
		if err != nil {
			return err
		}
		tr, err := TimerCreate(0.001)
		if err != nil {
			return err
		}
		reqs := []*Request{rb, ra, rg, rx, rt, pr, ps, tr}
		switch round {
		case 0:
			if _, err := Waitall(reqs); err != nil {
				return err
			}
		case 1:
			for range reqs {
				if _, _, err := Waitany(reqs); err != nil {
					return err
				}
			}
		case 2:
			for left := len(reqs); left > 0; {
				idx, _, err := Testsome(reqs)
				if err != nil {
					return err
				}
				left -= len(idx)
			}
		}
		if !slices.Equal(bb, vec(round, m)) {
			return fmt.Errorf("round %d: Ibcast wrong", round)
		}
		if want := float64(n * (n + 1) / 2); sum[0] != want || sum[m-1] != want {
			return fmt.Errorf("round %d: Iallreduce %v, want %v", round, sum[0], want)
		}
		for k := range ag {
			if ag[k] != int32(k*10) {
				return fmt.Errorf("round %d: Iallgather %v", round, ag)
			}
		}
		for k := range a2 {
			if a2[k] != int64(k*100+r) {
				return fmt.Errorf("round %d: Ialltoall %v", round, a2)
			}
		}
	}
	// Every other nonblocking form once, all in flight together.
	var reqs []*Request
	add := func(r *Request, err error) error {
		reqs = append(reqs, r)
		return err
	}
	red := make([]int64, 4)
	gat := make([]int64, n)
	sct := make([]int64, 1)
	scan, exscan := make([]int64, 2), make([]int64, 2)
	rsb := make([]int64, 1)
	gv := make([]int64, n)
	agv := make([]int64, n)
	ones := make([]int, n)
	for k := range ones {
		ones[k] = 1
	}
	a2v := make([]int64, n)
	rsv := make([]int64, 1)
	svr := make([]int64, 1)
	all := make([]int64, n)
	for k := range all {
		all[k] = int64(k + 1)
	}
	for _, err := range []error{
		add(Ireduce(c, []int64{1, 2, 3, int64(r)}, red, Sum, n-1)),
		add(Igather(c, []int64{int64(r)}, gat, 0)),
		add(Igatherv(c, []int64{int64(r)}, gv, ones, nil, 0)),
		add(Iscatter(c, all, sct, 0)),
		add(Iscatterv(c, all, ones, nil, svr, n-1)),
		add(Iallgatherv(c, []int64{int64(r)}, agv, ones, nil)),
		add(Ialltoallv(c, all, ones, nil, a2v, ones, nil)),
		add(IreduceScatterBlock(c, all, rsb, Sum)),
		add(IreduceScatter(c, all, rsv, ones, Sum)),
		add(Iscan(c, []int64{1, int64(r)}, scan, Sum)),
		add(Iexscan(c, []int64{1, int64(r)}, exscan, Sum)),
	} {
		if err != nil {
			return err
		}
	}
	if _, err := Waitall(reqs); err != nil {
		return err
	}
	switch {
	case r == n-1 && red[3] != int64(n*(n-1)/2):
		return fmt.Errorf("Ireduce %v", red)
	case r == 0 && (gat[n-1] != int64(n-1) || gv[n-1] != int64(n-1)):
		return fmt.Errorf("Igather %v, Igatherv %v", gat, gv)
	case sct[0] != int64(r+1) || svr[0] != int64(r+1):
		return fmt.Errorf("Iscatter %v, Iscatterv %v", sct, svr)
	case agv[n-1] != int64(n-1):
		return fmt.Errorf("Iallgatherv %v", agv)
	case a2v[0] != int64(r+1):
		return fmt.Errorf("Ialltoallv %v", a2v)
	case rsb[0] != int64(n*(r+1)) || rsv[0] != int64(n*(r+1)):
		return fmt.Errorf("IreduceScatterBlock %v, IreduceScatter %v", rsb, rsv)
	case scan[0] != int64(r+1) || scan[1] != int64(r*(r+1)/2):
		return fmt.Errorf("Iscan %v", scan)
	case r > 0 && (exscan[0] != int64(r) || exscan[1] != int64(r*(r-1)/2)):
		return fmt.Errorf("Iexscan %v", exscan)
	}
	return nil
}

func TestCollectivesNonblocking(t *testing.T) {
	for _, n := range []int{1, 2, 3, 4, 7} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			if err := Run(n, func(c *Comm) error {
				if err := collNonblocking(c); err != nil {
					return err
				}
				return c.Finalize()
			}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestCollectivesPersistent: AllreduceInit and BcastInit run again at
// each Start, on the buffers' contents then; Cancel and Free refuse an
// active collective.
func TestCollectivesPersistent(t *testing.T) {
	err := Run(3, func(c *Comm) error {
		r := c.Rank()
		send, recv := make([]int64, 8), make([]int64, 8)
		ar, err := AllreduceInit(c, send, recv, Sum)
		if err != nil {
			return err
		}
		buf := make([]int32, 5)
		br, err := BcastInit(c, buf, 2)
		if err != nil {
			return err
		}
		for it := range 5 {
			for i := range send {
				send[i] = int64(r * it)
			}
			if r == 2 {
				buf[4] = int32(it)
			}
			if err := Startall([]*Request{ar, br}); err != nil {
				return err
			}
			if err := ar.Cancel(); !errors.Is(err, ErrRequest) {
				return fmt.Errorf("Cancel of a collective: %v, want ErrRequest", err)
			}
			if err := ar.Free(); !errors.Is(err, ErrRequest) {
				return fmt.Errorf("Free of an active collective: %v, want ErrRequest", err)
			}
			reqs := []*Request{ar, br}
			if _, err := Waitall(reqs); err != nil {
				return err
			}
			if reqs[0] != ar {
				return errors.New("Waitall dropped a persistent request")
			}
			if recv[7] != int64(3*it) || buf[4] != int32(it) {
				return fmt.Errorf("start %d: allreduce %d, bcast %d", it, recv[7], buf[4])
			}
		}
		if err := ar.Free(); err != nil {
			return err
		}
		if err := br.Free(); err != nil {
			return err
		}
		return c.Finalize()
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestCollectiveErrors: a root out of range is ErrRoot, an operation that
// does not apply ErrOp, buffers that do not fit ErrCount, and counts that
// differ between ranks ErrTruncate or ErrCount where they show, never a
// hang.
func TestCollectiveErrors(t *testing.T) {
	err := Run(3, func(c *Comm) error {
		r := c.Rank()
		c.SetErrhandler(ErrorsReturn)
		checks := []struct {
			name string
			err  error
			want error
		}{
			{"Bcast root 3", Bcast(c, []int32{1}, 3), ErrRoot},
			{"Reduce root -1", Reduce(c, []int32{1}, []int32{0}, Sum, -1), ErrRoot},
			{"Max on complex", Allreduce(c, []complex128{1}, []complex128{0}, Max), ErrOp},
			{"Band on float", Allreduce(c, []float64{1}, []float64{0}, Band), ErrOp},
			{"zero ReduceOp", Allreduce(c, []int32{1}, []int32{0}, ReduceOp{}), ErrOp},
			{"user op of another type", Allreduce(c, []int32{1}, []int32{0}, NewReduceOp(matmul, false)), ErrOp},
			{"MaxLoc odd", Allreduce(c, []float64{1, 2, 3}, []float64{0, 0, 0}, MaxLoc), ErrCount},
			{"Allreduce lengths", Allreduce(c, []int32{1, 2}, []int32{0}, Sum), ErrCount},
			{"Allgather lengths", Allgather(c, []int32{1, 2}, []int32{0}), ErrCount},
			{"Alltoall lengths", Alltoall(c, []int32{1, 2}, []int32{0, 0}), ErrCount},
			{"Gatherv block outside", Gatherv(c, []int32{1}, make([]int32, 2), []int{1, 1, 1}, nil, r), ErrBuffer},
		}
		for _, k := range checks {
			if !errors.Is(k.err, k.want) || ErrorClass(k.err) != k.want {
				return fmt.Errorf("%s: %v, want %v", k.name, k.err, k.want)
			}
		}
		// Counts that differ between ranks: rank 1 broadcasts more than
		// rank 2 takes, and less than rank 0 expects.
		buf := make([]int32, 4+r)
		if r == 1 {
			buf = make([]int32, 5)
		}
		err := Bcast(c, buf, 1)
		switch r {
		case 0:
			if !errors.Is(err, ErrTruncate) {
				return fmt.Errorf("Bcast of more than expected: %v, want ErrTruncate", err)
			}
		case 2:
			if !errors.Is(err, ErrCount) {
				return fmt.Errorf("Bcast of fewer than expected: %v, want ErrCount", err)
			}
		}
		// Allreduce, Gather and Alltoall whose lengths differ between
		// ranks: an error where the difference arrives, no hang.
		ar := make([]int32, 4+r)
		err = Allreduce(c, ar, make([]int32, len(ar)), Sum)
		if r != 0 && err == nil { // rank 0's partners send it more, or it gets the result at its length
			return fmt.Errorf("rank %d: Allreduce of %d elements among 4, 5, 6: no error", r, len(ar))
		}
		if err != nil && !errors.Is(err, ErrTruncate) && !errors.Is(err, ErrCount) {
			return fmt.Errorf("rank %d: Allreduce of differing lengths: %v", r, err)
		}
		g := make([]int32, 3*2)
		err = Gather(c, make([]int32, 2+r%2), g, 0)
		if r == 0 && !errors.Is(err, ErrTruncate) {
			return fmt.Errorf("Gather of a longer block: %v, want ErrTruncate at the root", err)
		}
		a2 := make([]int32, 3*(1+r))
		err = Alltoall(c, make([]int32, len(a2)), a2)
		if !errors.Is(err, ErrTruncate) && !errors.Is(err, ErrCount) {
			return fmt.Errorf("rank %d: Alltoall of differing blocks: %v, want ErrTruncate or ErrCount", r, err)
		}
		// The communicator goes on.
		out := make([]int32, 1)
		if err := Allreduce(c, []int32{1}, out, Sum); err != nil || out[0] != 3 {
			return fmt.Errorf("Allreduce after the mismatch: %v %v", out, err)
		}
		return c.Finalize()
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestCollectiveContext: a collective whose context ends first returns
// ErrCanceled and abandons the communicator's collectives.
func TestCollectiveContext(t *testing.T) {
	err := Run(2, func(c *Comm) error {
		c.SetErrhandler(ErrorsReturn)
		buf := make([]float64, 4)
		if err := AllreduceContext(context.Background(), c, []float64{1, 2, 3, 4}, buf, Sum); err != nil || buf[3] != 8 {
			return fmt.Errorf("AllreduceContext: %v %v", buf, err)
		}
		d, err := c.Dup()
		if err != nil {
			return err
		}
		d.SetErrhandler(ErrorsReturn)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		if c.Rank() == 0 { // rank 1 never joins
			if err := BcastContext(ctx, d, buf, 1); !errors.Is(err, ErrCanceled) {
				return fmt.Errorf("BcastContext with no root: %v, want ErrCanceled", err)
			}
			if err := Bcast(d, buf, 0); !errors.Is(err, ErrComm) {
				return fmt.Errorf("Bcast after an abandoned one: %v, want ErrComm", err)
			}
		}
		if err := d.Free(); err != nil {
			return err
		}
		return c.Finalize()
	})
	if err != nil {
		t.Fatal(err)
	}
}

// skipCollAllocs skips a test of a collective's allocations where they
// are not the collective's own: under the race detector, with an
// interceptor registered for the whole run, or with the ranks on a
// network transport that loses, repeats or reorders frames.
func skipCollAllocs(t *testing.T) {
	t.Helper()
	if raceEnabled {
		testskip.Skip(t, testskip.RaceDetector, "the race detector allocates")
	}
	if intercepted() {
		testskip.Skip(t, testskip.Intercepted, "an interceptor is registered for the whole run")
	}
	if v, ok := cvar.Lookup("engine_net_force"); ok && v.String() == "true" {
		for _, name := range []string{"nic_drop_rate", "nic_dup_rate", "nic_reorder_rate"} {
			if v, ok := cvar.Lookup(name); ok && v.String() != "0" {
				testskip.Skip(t, testskip.LossyNetwork, "engine_net_force with "+name+" "+v.String()+": the network transport's retransmissions allocate")
			}
		}
	}
}

// leastAllocs returns the least of three measures of fn's allocations a
// call (testing.AllocsPerRun of runs calls), and the first error fn
// returned. AllocsPerRun counts every rank's allocations and rounds down,
// and the engine's pools may still grow once when a busy machine delays a
// rank: a call allocates if three measures of it do. Every rank must
// measure as often, so that all make the same calls.
func leastAllocs(runs int, fn func() error) (float64, error) {
	var err error
	allocs := math.Inf(1)
	for range 3 {
		allocs = min(allocs, testing.AllocsPerRun(runs, func() {
			if e := fn(); e != nil && err == nil {
				err = e
			}
		}))
	}
	return allocs, err
}

// TestCollectiveAllocs: the blocking collectives allocate nothing per
// call once warm.
func TestCollectiveAllocs(t *testing.T) {
	skipCollAllocs(t)
	err := Run(4, func(c *Comm) error {
		small, out := []float64{1}, make([]float64, 1)
		big, bigOut := make([]float64, 4096), make([]float64, 4096)
		ag := make([]float64, 4)
		a2s, a2 := make([]float64, 4*64), make([]float64, 4*64)
		cases := []struct {
			name string
			fn   func() error
		}{
			{"Allreduce8", func() error { return Allreduce(c, small, out, Sum) }},
			{"Allreduce32K", func() error { return Allreduce(c, big, bigOut, Sum) }},
			{"Bcast8", func() error { return Bcast(c, small, 0) }},
			{"Bcast32K", func() error { return Bcast(c, big, 1) }},
			{"Reduce", func() error { return Reduce(c, big, bigOut, Max, 2) }},
			{"Allgather", func() error { return Allgather(c, small, ag) }},
			{"Alltoall", func() error { return Alltoall(c, a2s, a2) }},
		}
		for _, k := range cases {
			allocs, err := leastAllocs(100, k.fn)
			if err != nil {
				return err
			}
			if allocs != 0 && c.Rank() == 0 {
				t.Errorf("%s allocates %v times a call", k.name, allocs)
			}
		}
		return c.Finalize()
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestIcollectiveAllocs: a nonblocking collective and its Wait allocate
// one object a rank once warm, its request (collRequest); the schedule is
// the rank's spare (getSched). The engine makes a matching list for each
// of the 1024 tags of nonblocking collectives the first time a receive
// is posted with it before its message comes, and the first time a
// message comes first: each measure spans a whole cycle of tags, so that
// the few lists still made count for less than one allocation a call.
func TestIcollectiveAllocs(t *testing.T) {
	skipCollAllocs(t)
	const n = 2
	err := Run(n, func(c *Comm) error {
		small, out := []float64{1}, make([]float64, 1)
		wait := func(r *Request, err error) error {
			if err != nil {
				return err
			}
			_, err = r.Wait()
			return err
		}
		cases := []struct {
			name string
			fn   func() error
		}{
			{"Iallreduce8", func() error { return wait(Iallreduce(c, small, out, Sum)) }},
			{"Ibcast8", func() error { return wait(Ibcast(c, small, 0)) }},
			{"Ibarrier", func() error { return wait(c.Ibarrier()) }},
		}
		for _, k := range cases {
			for range 2 * collTagSpan {
				if err := k.fn(); err != nil {
					return err
				}
			}
			// n a call is one a rank.
			allocs, err := leastAllocs(collTagSpan, k.fn)
			if err != nil {
				return err
			}
			if allocs > n && c.Rank() == 0 {
				t.Errorf("%s and its Wait allocate %v times a call on %d ranks, want at most one a rank", k.name, allocs, n)
			}
		}
		return c.Finalize()
	})
	if err != nil {
		t.Fatal(err)
	}
}

var scCollectives = scenario("collectives", func(c *Comm) error {
	for _, m := range []int{0, 4, 1000} {
		if err := collCheck(c, m); err != nil {
			return err
		}
	}
	return collNonblocking(c)
})

// TestCollectivesProcesses runs the collectives in-process and as
// processes over shared memory.
func TestCollectivesProcesses(t *testing.T) {
	for _, n := range []int{2, 3, 4} {
		t.Run(fmt.Sprint(n), func(t *testing.T) { both(t, n, scCollectives) })
	}
}

// TestCollectiveRankGone: a rank that leaves (in-process its fn returns,
// which finalizes it; as processes it exits) while the others call
// collectives makes every rank whose result needs its contribution return
// an error, ErrProcFailed where it talks to the gone rank, and none hangs
// or reports success.
func TestCollectiveRankGone(t *testing.T) {
	for _, n := range []int{2, 3, 4, 5} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			var failed atomic.Int32
			err := Run(n, func(c *Comm) error {
				if c.Rank() == n-1 {
					return nil
				}
				return collRankGone(c, &failed)
			})
			if err != nil {
				t.Fatal(err)
			}
			if failed.Load() == 0 {
				t.Error("no rank got ErrProcFailed")
			}
		})
	}
	t.Run("processes", func(t *testing.T) { runProcesses(t, 3, scCollRankGone) })
}

var scCollRankGone = scenario("coll-rank-gone", func(c *Comm) error {
	n := c.Size()
	if c.Rank() == n-1 {
		os.Exit(0) // leaves without Finalize
	}
	var failed atomic.Int32
	if err := collRankGone(c, &failed); err != nil {
		return err
	}
	if c.Rank() == 1 && failed.Load() == 0 { // rank 1 exchanges with rank 2 in each
		return errors.New("rank 1 got no ErrProcFailed")
	}
	Finalize() // fails: a rank is gone
	return errFinalized
})

// collRankGone runs collectives on c, whose last rank is gone, and checks
// that each returns an error; failed counts the ErrProcFailed ones.
func collRankGone(c *Comm, failed *atomic.Int32) error {
	n := c.Size()
	c.SetErrhandler(ErrorsReturn)
	check := func(name string, err error) error { return goneErr(c, failed, name, err) }
	out := make([]float64, 16)
	if err := check("Allreduce", Allreduce(c, make([]float64, 16), out, Sum)); err != nil {
		return err
	}
	ag := make([]int32, 2*n)
	if err := check("Allgather", Allgather(c, []int32{1, 2}, ag)); err != nil {
		return err
	}
	if err := check("Bcast", Bcast(c, out, n-1)); err != nil {
		return err
	}
	return check("Barrier", c.Barrier())
}

// goneErr checks that collective name on c, run with a rank gone,
// returned err: ErrProcFailed (counted in failed) or a count error that
// came along the data.
func goneErr(c *Comm, failed *atomic.Int32, name string, err error) error {
	switch {
	case errors.Is(err, ErrProcFailed):
		failed.Add(1)
	case errors.Is(err, ErrCount), errors.Is(err, ErrTruncate):
	default:
		return fmt.Errorf("rank %d: %s with a rank gone: %v, want an error", c.Rank(), name, err)
	}
	return nil
}

// TestCollectiveContextForms: every Context form with a context that
// could end (so the collective runs as its nonblocking form, waited for)
// gives the plain form's result.
func TestCollectiveContextForms(t *testing.T) {
	err := Run(3, func(c *Comm) error {
		n, r := c.Size(), c.Rank()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		ones := []int{1, 1, 1}
		all := []int64{1, 2, 3}
		b := []int64{int64(r)}
		red, gat, sct, ag, a2 := make([]int64, 1), make([]int64, n), make([]int64, 1), make([]int64, n), make([]int64, n)
		gv, sv, agv, a2v := make([]int64, n), make([]int64, 1), make([]int64, n), make([]int64, n)
		rsb, rs, sc, ex := make([]int64, 1), make([]int64, 1), make([]int64, 1), []int64{-1}
		sum := []int64{int64(r)}
		for _, err := range []error{
			BcastContext(ctx, c, b, 2),
			ReduceContext(ctx, c, []int64{1}, red, Sum, 0),
			AllreduceContext(ctx, c, InPlace[int64](), sum, Sum),
			GatherContext(ctx, c, []int64{int64(r)}, gat, 1),
			ScatterContext(ctx, c, all, sct, 0),
			AllgatherContext(ctx, c, []int64{int64(r)}, ag),
			AlltoallContext(ctx, c, all, a2),
			GathervContext(ctx, c, []int64{int64(r)}, gv, ones, nil, 0),
			ScattervContext(ctx, c, all, ones, nil, sv, 0),
			AllgathervContext(ctx, c, []int64{int64(r)}, agv, ones, nil),
			AlltoallvContext(ctx, c, all, ones, nil, a2v, ones, nil),
			ReduceScatterBlockContext(ctx, c, all, rsb, Sum),
			ReduceScatterContext(ctx, c, all, rs, ones, Sum),
			ScanContext(ctx, c, []int64{1}, sc, Sum),
			ExscanContext(ctx, c, []int64{1}, ex, Sum),
		} {
			if err != nil {
				return err
			}
		}
		switch {
		case b[0] != 2, r == 0 && red[0] != 3, sum[0] != 3, r == 1 && gat[2] != 2, sct[0] != int64(r+1):
			return fmt.Errorf("rank %d: bcast %v reduce %v allreduce %v gather %v scatter %v", r, b, red, sum, gat, sct)
		case ag[2] != 2, a2[2] != int64(r+1), r == 0 && gv[2] != 2, sv[0] != int64(r+1), agv[1] != 1, a2v[0] != int64(r+1):
			return fmt.Errorf("rank %d: allgather %v alltoall %v gatherv %v scatterv %v allgatherv %v alltoallv %v", r, ag, a2, gv, sv, agv, a2v)
		case rsb[0] != int64(3*(r+1)), rs[0] != int64(3*(r+1)), sc[0] != int64(r+1), r > 0 && ex[0] != int64(r), r == 0 && ex[0] != -1:
			return fmt.Errorf("rank %d: reduce-scatter %v %v scan %v exscan %v", r, rsb, rs, sc, ex)
		}
		return c.Finalize()
	})
	if err != nil {
		t.Fatal(err)
	}
}
