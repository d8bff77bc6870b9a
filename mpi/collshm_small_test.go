package mpi

import (
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/tachyon-hpc/tachyon/internal/testcvar"
)

// TestCollShmAllreduceSmall: an Allreduce of up to a flag line's data goes
// through the area on any host (mpi_coll_shm_allreduce_small), by the
// small path for the predefined operations and by the general one for
// MaxLoc, with every rank getting the same bits, the ranks' vectors
// combined in rank order, in place or not; an operation that does not
// apply is ErrOp on every rank, and the communicator goes on; a larger
// one, or any with the variable at 0, goes by messages.
func TestCollShmAllreduceSmall(t *testing.T) {
	needAreas(t)
	testcvar.Set(t, "mpi_coll_shm_over_max", "0") // the small path alone decides, oversubscribed or not
	for _, limit := range []int{0, 48} {
		testcvar.Set(t, "mpi_coll_shm_allreduce_small", fmt.Sprint(limit))
		for _, n := range []int{2, 3, 5} {
			if err := Run(n, func(c *Comm) error { return allreduceSmallCheck(c, limit) }); err != nil {
				t.Fatalf("mpi_coll_shm_allreduce_small %d, %d ranks: %v", limit, n, err)
			}
		}
	}
}

// allreduceSmallCheck is TestCollShmAllreduceSmall on one communicator.
func allreduceSmallCheck(c *Comm, limit int) error {
	n, r := c.Size(), c.Rank()
	c.SetErrhandler(ErrorsReturn)
	if err := c.Barrier(); err != nil {
		return err
	}
	before := pvShmAllreduce.Value()
	if err := c.Barrier(); err != nil { // every rank has read it
		return err
	}
	// Sums whose bits depend on the order: rank 0 adds 1e16, rank 1 one,
	// rank 2 -1e16, and so on.
	term := func(r, i int) float64 {
		return [...]float64{1e16, 1, -1e16, 0.5, 3}[r%5] * float64(i+1)
	}
	calls := 0
	for _, m := range []int{1, 3, 6, 7} { // 8 to 56 bytes: the last over a line
		for _, inPlace := range []bool{false, true} {
			send, recv := make([]float64, m), make([]float64, m)
			for i := range send {
				send[i] = term(r, i)
			}
			if inPlace {
				copy(recv, send)
				send = nil
			}
			if err := Allreduce(c, send, recv, Sum); err != nil {
				return fmt.Errorf("%d elements, in place %v: %w", m, inPlace, err)
			}
			for i, v := range recv {
				want := term(n-1, i)
				for j := n - 2; j >= 0; j-- {
					want = term(j, i) + want
				}
				// By messages the order is the algorithm's.
				if area := m*8 <= limit; area && math.Float64bits(v) != math.Float64bits(want) ||
					!area && math.Abs(v-want) > 4 {
					return fmt.Errorf("%d elements, in place %v: recv[%d] = %v, want %v (rank order)", m, inPlace, i, v, want)
				}
			}
			if m*8 <= limit {
				calls++
			}
			// Every rank has the same bits.
			bits := []uint64{math.Float64bits(recv[0])}
			all := make([]uint64, n)
			if err := Allgather(c, bits, all); err != nil {
				return err
			}
			for j, b := range all {
				if b != bits[0] {
					return fmt.Errorf("%d elements, in place %v: rank %d has %v, this one %v", m, inPlace, j, math.Float64frombits(b), recv[0])
				}
			}
		}
	}
	// Prod and Max in int32, Bxor through its kernel, MaxLoc through the
	// general path: all through the area.
	p, out := []int32{int32(r + 2), int32(-r)}, make([]int32, 2)
	if err := Allreduce(c, p, out, Prod); err != nil {
		return err
	}
	want := int32(1)
	for j := range n {
		want *= int32(j + 2)
	}
	if out[0] != want || out[1] != 0 && n > 1 {
		return fmt.Errorf("Prod: %v, want [%d 0]", out, want)
	}
	if err := Allreduce(c, p, out, Max); err != nil || out[0] != int32(n+1) || out[1] != 0 {
		return fmt.Errorf("Max: %v, %v", out, err)
	}
	x := []uint64{1 << r}
	if err := Allreduce(c, nil, x, Bxor); err != nil || x[0] != 1<<n-1 {
		return fmt.Errorf("Bxor in place: %#x, %v, want %#x", x[0], err, uint64(1<<n-1))
	}
	if err := Allreduce(c, p, out, MaxLoc); err != nil || out[0] != int32(n+1) || out[1] != int32(-(n-1)) {
		return fmt.Errorf("MaxLoc: %v, %v", out, err)
	}
	if limit > 0 {
		calls += 4
	}
	// An operation that does not apply: every rank knows before it
	// publishes anything.
	if err := Allreduce(c, []float64{1}, make([]float64, 1), Band); !errors.Is(err, ErrOp) {
		return fmt.Errorf("Band on float64: %v, want ErrOp", err)
	}
	if err := c.Barrier(); err != nil {
		return fmt.Errorf("Barrier after an ErrOp: %w", err)
	}
	if got := pvShmAllreduce.Value() - before; c.Rank() == 0 && got != uint64(calls*n) {
		return fmt.Errorf("%d allreduces through the area, want %d", got, calls*n)
	}
	return nil
}

// BenchmarkAllreduceSmallPath times a 2-rank 8-byte Allreduce through the
// area, by the small path and by the general one (MaxLoc's, on a pair of
// int32), in one invocation, for their ratio.
func BenchmarkAllreduceSmallPath(b *testing.B) {
	for _, op := range []ReduceOp{Max, MaxLoc} {
		b.Run(op.String(), func(b *testing.B) {
			in, out := [2][]int32{make([]int32, 2), make([]int32, 2)}, [2][]int32{make([]int32, 2), make([]int32, 2)}
			benchColl(b, 2, func(c *Comm) error { return Allreduce(c, in[c.Rank()], out[c.Rank()], op) })
		})
	}
}

// TestCollShmAllreduceThreshold: ranks whose Allreduce counts differ
// across a threshold of the area (a line's data, where the small path
// ends; mpi_coll_shm_allreduce_long, where the reduce-scatter starts) take
// two paths, and the ones in the area, seeing that another went by
// messages, go by messages too: every rank gets ErrTruncate or ErrCount
// rather than a hang, and the communicator goes on.
func TestCollShmAllreduceThreshold(t *testing.T) {
	needAreas(t)
	testcvar.Set(t, "mpi_coll_shm_allreduce_small", "48")
	testcvar.Set(t, "mpi_coll_shm_over_max", "0")
	testcvar.Set(t, "mpi_coll_shm_allreduce_long", "1024")
	testcvar.Set(t, "mpi_coll_shm_allreduce_oversubscribed", "true")
	done := make(chan error, 1)
	go func() {
		done <- Run(3, func(c *Comm) error {
			c.SetErrhandler(ErrorsReturn)
			r := c.Rank()
			for _, m := range [][3]int{{6, 7, 6}, {7, 6, 7}, {128, 100, 128}, {100, 128, 6}} { // elements by rank
				send, recv := make([]float64, m[r]), make([]float64, m[r])
				err := Allreduce(c, send, recv, Sum)
				if !errors.Is(err, ErrTruncate) && !errors.Is(err, ErrCount) {
					return fmt.Errorf("rank %d: Allreduce of %d elements among %v: %v, want ErrTruncate or ErrCount", r, m[r], m, err)
				}
				if err := c.Barrier(); err != nil {
					return fmt.Errorf("rank %d: Barrier after %v: %w", r, m, err)
				}
				out := make([]float64, 6)
				if err := Allreduce(c, []float64{1, 1, 1, 1, 1, 1}, out, Sum); err != nil || out[5] != 3 {
					return fmt.Errorf("rank %d: Allreduce after %v: %v, %v", r, m, out, err)
				}
			}
			return nil
		})
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("ranks whose counts differ across a threshold hang")
	}
}
