package mpi

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"testing"

	"github.com/tachyon-hpc/tachyon/internal/testcvar"
)

// The large allreduce through the shared-memory collective area
// (collshm_allreduce.go) against references folded here in rank order
// with the operation's own kernel, so that every result must have the
// same bits: every predefined operation on float64 and int32, MaxLoc and
// MinLoc, a non-commutative user operation, in place, at vector sizes
// around mpi_coll_shm_allreduce_long and over several chunks (an odd
// count, a partial last chunk), on 1 to 9 ranks.

// rsagElem is the element types the test vectors are made of.
type rsagElem interface{ ~int32 | ~float64 }

// rsagVal is rank r's i-th element of a test vector: fractions for the
// floats, so that another order of the additions would change bits.
func rsagVal[T rsagElem](r, i int) T {
	h := uint32(r*7919+i*31+17) * 2654435761
	var zero T
	switch any(zero).(type) {
	case float64, float32:
		return T(float64(h>>8)/float64(1<<13) - 1000)
	}
	return T(int32(h>>20) - 2048 + int32(r)) // small, so that Prod wraps alike
}

// rsagCase runs an Allreduce of m elements with op on c, in place if
// asked, and checks it against the rank-order fold of every rank's
// vector (vec gives them): the same bits, or where the algorithm by
// messages may combine in another order (!exact), floats within 1e-12.
func rsagCase[T Numeric](c *Comm, op ReduceOp, m int, inPlace, exact bool, vec func(r, m int) []T) error {
	n, r := c.Size(), c.Rank()
	k, err := kernelFor("test", op, dtypeOf[T]())
	if err != nil {
		return err
	}
	want := vec(n-1, m)
	for j := n - 2; j >= 0; j-- {
		k(AsBytes(vec(j, m)), AsBytes(want))
	}
	send, out := vec(r, m), make([]T, m)
	if inPlace {
		copy(out, send)
		send = nil
	}
	if err := Allreduce(c, send, out, op); err != nil {
		return fmt.Errorf("%v of %d %T (in place %v): %w", op, m, out, inPlace, err)
	}
	if !slices.Equal(AsBytes(out), AsBytes(want)) {
		i := 0
		for i < m && (out[i] == want[i] || !exact && near(out[i], want[i])) {
			i++
		}
		if i == m {
			return nil
		}
		return fmt.Errorf("%v of %d %T (in place %v) on %d ranks: [%d] = %v, want %v", op, m, out, inPlace, n, i, out[i], want[i])
	}
	return nil
}

// near reports whether floats a and b agree to 1e-12 of b.
func near[T Numeric](a, b T) bool {
	x, ok1 := any(a).(float64)
	y, ok2 := any(b).(float64)
	return ok1 && ok2 && math.Abs(x-y) <= 1e-12*math.Abs(y)
}

func rsagVec[T rsagElem](r, m int) []T {
	v := make([]T, m)
	for i := range v {
		v[i] = rsagVal[T](r, i)
	}
	return v
}

// rsagPairs is a MaxLoc vector: (value, index) pairs whose values tie
// between ranks now and then, so that the lower index must win.
func rsagPairs[T rsagElem](r, m int) []T {
	v := make([]T, m)
	for i := 0; i+1 < m; i += 2 {
		v[i] = T((i*13 + r*(i%5)) % 97)
		v[i+1] = T(r)
	}
	return v
}

// rsagCheck runs every case on c with vectors of m elements (of T at
// least; pairs take m rounded down to even).
func rsagCheck(c *Comm, m int, exact bool) error {
	for _, in := range []bool{false, true} {
		for _, op := range []ReduceOp{Sum, Prod, Max, Min} {
			if err := rsagCase(c, op, m, in, exact, rsagVec[float64]); err != nil {
				return err
			}
		}
		for _, op := range []ReduceOp{Sum, Prod, Max, Min, Land, Lor, Lxor, Band, Bor, Bxor} {
			if err := rsagCase(c, op, 2*m, in, exact, rsagVec[int32]); err != nil {
				return err
			}
		}
		for _, op := range []ReduceOp{MaxLoc, MinLoc} {
			if err := rsagCase(c, op, m&^1, in, exact, rsagPairs[float64]); err != nil {
				return err
			}
			if err := rsagCase(c, op, 2*m, in, exact, rsagPairs[int32]); err != nil {
				return err
			}
		}
		if err := rsagCase(c, NewReduceOp(matmul, false), m&^3, in, exact, matvec); err != nil {
			return err
		}
	}
	return nil
}

// TestCollShmAllreduceScatter: slots of 1 KiB and the threshold at 1 KiB,
// vectors of 8 bytes under it to several chunks, on 1 to 9 ranks, and on
// a Split; the path must run above the threshold and not below.
func TestCollShmAllreduceScatter(t *testing.T) {
	needAreas(t)
	testcvar.Set(t, "engine_coll_shm_slots", "3")
	testcvar.Set(t, "engine_coll_shm_slot_bytes", "1024")
	testcvar.Set(t, "mpi_coll_shm_allreduce_long", "1024")
	testcvar.Set(t, "mpi_coll_shm_allreduce_oversubscribed", "true")
	for n := 1; n <= 9; n++ {
		t.Run(fmt.Sprintf("n=%d", n), func(t *testing.T) {
			err := Run(n, func(c *Comm) error {
				for _, m := range []int{127, 128, 129, 1000, 1027} { // float64s
					before := pvShmAllreduceRSAG.Value()
					if err := rsagCheck(c, m, m >= 128); err != nil {
						return err
					}
					if err := c.Barrier(); err != nil { // every rank has counted
						return err
					}
					if ran := pvShmAllreduceRSAG.Value() > before; n > 1 && m >= 128 && !ran {
						return fmt.Errorf("vectors of %d float64s did not run through the area", m)
					}
				}
				h, err := c.Split(c.Rank()%2, 0)
				if err != nil {
					return err
				}
				if err := rsagCheck(h, 700, true); err != nil {
					return fmt.Errorf("a half: %w", err)
				}
				return h.Free()
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestCollShmAllreduceScatterDefault: 1 MiB and 4 MiB + 8 bytes with the
// default geometry and threshold, and a vector just under the threshold,
// which runs by messages.
func TestCollShmAllreduceScatterDefault(t *testing.T) {
	needAreas(t)
	testcvar.Set(t, "mpi_coll_shm_allreduce_oversubscribed", "true") // 3 ranks on 2 CPUs here
	long := int(collShmAllreduceLong.Get()) / 8
	for _, n := range []int{2, 3} {
		err := Run(n, func(c *Comm) error {
			for _, m := range []int{1 << 17, 1<<19 + 1, long, long - 1} {
				before := pvShmAllreduceRSAG.Value()
				if err := rsagCase(c, Sum, m, m%2 == 1, m >= long, rsagVec[float64]); err != nil {
					return err
				}
				if err := c.Barrier(); err != nil {
					return err
				}
				if ran := pvShmAllreduceRSAG.Value() > before; ran != (m >= long) {
					return fmt.Errorf("%d float64s through the area by reduce-scatter: %v", m, ran)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatalf("%d ranks: %v", n, err)
		}
	}
}

// scRSAG checks the reduce-scatter as processes: every case at 1 KiB
// slots (the environment sets them) and a 1 MiB + 8 B Sum, which must
// take the path.
var scRSAG = scenario("coll-shm-rsag", func(c *Comm) error {
	before := pvShmAllreduceRSAG.Value()
	for _, m := range []int{128, 1027} {
		if err := rsagCheck(c, m, true); err != nil {
			return err
		}
	}
	if err := rsagCase(c, Sum, 1<<17+1, false, true, rsagVec[float64]); err != nil {
		return err
	}
	if c.Size() > 1 && pvShmAllreduceRSAG.Value() == before {
		return fmt.Errorf("rank %d: no allreduce by reduce-scatter through the area", c.Rank())
	}
	return nil
})

func TestCollShmAllreduceScatterProcesses(t *testing.T) {
	for _, n := range []int{2, 3} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			runProcesses(t, n, scRSAG, "TACHYON_ENGINE_COLL_SHM_SLOT_BYTES=1024", "TACHYON_MPI_COLL_SHM_ALLREDUCE_LONG=1024",
				"TACHYON_MPI_COLL_SHM_ALLREDUCE_OVERSUBSCRIBED=true")
		})
	}
}

// TestCollShmAllreduceScatterOversubscribed: on more goroutine ranks than
// CPUs the reduce-scatter runs only with
// mpi_coll_shm_allreduce_oversubscribed.
func TestCollShmAllreduceScatterOversubscribed(t *testing.T) {
	needAreas(t)
	n := runtime.NumCPU() + 1
	for _, over := range []bool{false, true} {
		testcvar.Set(t, "mpi_coll_shm_allreduce_oversubscribed", fmt.Sprint(over))
		err := Run(n, func(c *Comm) error {
			m := int(collShmAllreduceLong.Get()) / 8
			before := pvShmAllreduceRSAG.Value()
			if err := rsagCase(c, Sum, m, false, false, rsagVec[float64]); err != nil {
				return err
			}
			if err := c.Barrier(); err != nil {
				return err
			}
			want := over || !c.p.ep.HostColl().Oversubscribed()
			if ran := pvShmAllreduceRSAG.Value() > before; ran != want {
				return fmt.Errorf("%d ranks, oversubscribed %v, the cvar %v: reduce-scatter ran %v", n, c.p.ep.HostColl().Oversubscribed(), over, ran)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestCollShmAllreduceOverSmall: on more goroutine ranks than CPUs an
// Allreduce, and a Reduce, of up to mpi_coll_shm_over_max bytes goes
// through the area (with the right sums), and by messages when the cvar
// is 0 (and mpi_coll_shm_allreduce_small too).
func TestCollShmAllreduceOverSmall(t *testing.T) {
	needAreas(t)
	testcvar.Set(t, "mpi_coll_shm_allreduce_small", "0")
	n := runtime.NumCPU() + 1
	for _, limit := range []int{0, 48} {
		testcvar.Set(t, "mpi_coll_shm_over_max", fmt.Sprint(limit))
		err := Run(n, func(c *Comm) error {
			if !c.p.ep.HostColl().Oversubscribed() {
				return nil // the host's CPUs are more than runtime.NumCPU says
			}
			if err := c.Barrier(); err != nil {
				return err
			}
			before, beforeR := pvShmAllreduce.Value(), pvShmReduce.Value()
			if err := c.Barrier(); err != nil { // every rank has read it
				return err
			}
			for k, m := range []int{1, 6, 7} { // 8 to 56 bytes: the last over the limit
				send, recv := make([]float64, m), make([]float64, m)
				for i := range send {
					send[i] = float64(c.Rank()*10 + i)
				}
				if err := Allreduce(c, send, recv, Sum); err != nil {
					return err
				}
				for i, v := range recv {
					if want := float64(10*n*(n-1)/2 + n*i); v != want {
						return fmt.Errorf("%d elements: recv[%d] = %v, want %v", m, i, v, want)
					}
				}
				root := k % n
				clear(recv)
				if err := Reduce(c, send, recv, Sum, root); err != nil {
					return err
				}
				for i, v := range recv {
					if want := float64(10*n*(n-1)/2 + n*i); c.Rank() == root && v != want {
						return fmt.Errorf("Reduce of %d elements: recv[%d] = %v, want %v", m, i, v, want)
					}
				}
			}
			if err := c.Barrier(); err != nil {
				return err
			}
			want := uint64(0)
			if limit > 0 {
				want = 2 * uint64(n) // two calls of n ranks each
			}
			if got := pvShmAllreduce.Value() - before; got != want && c.Rank() == 0 {
				return fmt.Errorf("mpi_coll_shm_over_max %d: %d allreduces through the area, want %d", limit, got, want)
			}
			if got := pvShmReduce.Value() - beforeR; got != want && c.Rank() == 0 {
				return fmt.Errorf("mpi_coll_shm_over_max %d: %d reduces through the area, want %d", limit, got, want)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestCollShmGatherAllOver: on more goroutine ranks than CPUs, Allgather
// and Alltoall whose rank's part fits a flag line go through the area,
// in place or not, with every block where it belongs; differing blocks
// give every rank an error, and the communicator goes on.
func TestCollShmGatherAllOver(t *testing.T) {
	needAreas(t)
	n := runtime.NumCPU() + 1
	err := Run(n, func(c *Comm) error {
		if !c.p.ep.HostColl().Oversubscribed() {
			return nil // the host's CPUs are more than runtime.NumCPU says
		}
		c.SetErrhandler(ErrorsReturn)
		r := c.Rank()
		if err := c.Barrier(); err != nil {
			return err
		}
		ag, aa := pvShmAllgather.Value(), pvShmAlltoall.Value()
		if err := c.Barrier(); err != nil {
			return err
		}
		calls := 0
		for m := 1; m*8*n <= shmInline; m++ { // elements a block
			for _, inPlace := range []bool{false, true} {
				calls++
				send, recv := make([]int64, m), make([]int64, m*n)
				for i := range send {
					send[i] = int64(100*r + i)
				}
				var err error
				if inPlace {
					copy(recv[r*m:], send)
					err = Allgather(c, nil, recv)
				} else {
					err = Allgather(c, send, recv)
				}
				if err != nil {
					return fmt.Errorf("Allgather of %d elements, in place %v: %v", m, inPlace, err)
				}
				for j := range n {
					for i := range m {
						if recv[j*m+i] != int64(100*j+i) {
							return fmt.Errorf("Allgather of %d, in place %v: block %d is %v", m, inPlace, j, recv[j*m:(j+1)*m])
						}
					}
				}
				all := make([]int64, m*n) // block j goes to rank j
				for j := range n {
					for i := range m {
						all[j*m+i] = int64(1000*r + 10*j + i)
					}
				}
				if inPlace {
					copy(recv, all)
					err = Alltoall(c, nil, recv)
				} else {
					err = Alltoall(c, all, recv)
				}
				if err != nil {
					return fmt.Errorf("Alltoall of %d a block, in place %v: %v", m, inPlace, err)
				}
				for j := range n {
					for i := range m {
						if recv[j*m+i] != int64(1000*j+10*r+i) {
							return fmt.Errorf("Alltoall of %d, in place %v: block %d is %v", m, inPlace, j, recv[j*m:(j+1)*m])
						}
					}
				}
			}
		}
		if err := c.Barrier(); err != nil {
			return err
		}
		if r == 0 {
			if got, want := pvShmAllgather.Value()-ag, uint64(calls*n); got != want {
				return fmt.Errorf("%d allgathers through the area, want %d", got, want)
			}
			if got, want := pvShmAlltoall.Value()-aa, uint64(calls*n); got != want {
				return fmt.Errorf("%d all-to-alls through the area, want %d", got, want)
			}
		}
		if err := c.Barrier(); err != nil { // rank 0 has read the counts
			return err
		}
		// Rank 0's block is longer than the others'.
		m := 1
		if r == 0 {
			m = 2
		}
		err := Allgather(c, make([]int64, m), make([]int64, m*n))
		if !errors.Is(err, ErrCount) && !errors.Is(err, ErrTruncate) {
			return fmt.Errorf("rank %d: Allgather of differing blocks: %v", r, err)
		}
		err = Alltoall(c, make([]int64, m*n), make([]int64, m*n))
		if !errors.Is(err, ErrCount) && !errors.Is(err, ErrTruncate) {
			return fmt.Errorf("rank %d: Alltoall of differing blocks: %v", r, err)
		}
		got := make([]int64, n)
		if err := Allgather(c, []int64{int64(r)}, got); err != nil {
			return fmt.Errorf("rank %d: Allgather after a mismatch: %v", r, err)
		}
		if got[n-1] != int64(n-1) {
			return fmt.Errorf("rank %d: Allgather after a mismatch: %v", r, got)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
