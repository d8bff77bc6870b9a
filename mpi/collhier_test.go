package mpi

import (
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/tachyon-hpc/tachyon/internal/testcvar"
)

// The hierarchical collectives (collhier.go) on goroutine ranks given a
// table of hosts: the layouts a job across hosts has, with every message
// in memory, so that every size and layout runs quickly. Across hosts for
// real: TestCollHierAcrossFakeHosts (bootstrap_test.go) and hwtests.

// hierLayouts are tables of hosts by rank (a host's lowest rank) for n
// ranks: blocks of two, round robin over three hosts, a lone rank and
// blocks of three, and one host of all but the last rank. Each has a host
// of several ranks from 4 ranks up.
func hierLayouts(n int) map[string][]int32 {
	blocks, cyclic, uneven, big := make([]int32, n), make([]int32, n), make([]int32, n), make([]int32, n)
	for r := range n {
		blocks[r] = int32(r &^ 1)
		cyclic[r] = int32(r % 3)
		uneven[r] = int32(0)
		if r > 0 {
			uneven[r] = int32(1 + (r-1)/3*3)
		}
		big[r] = 0
		if r == n-1 {
			big[r] = int32(r)
		}
	}
	return map[string][]int32{"blocks": blocks, "cyclic": cyclic, "uneven": uneven, "big": big}
}

// withHosts gives c's rank the table of hosts, before c's first
// collective.
func withHosts(c *Comm, hosts []int32) {
	c.p.hosts = hosts
	c.hierLayout.Store(nil)
}

// TestCollHier: every collective against its reference (collCheck) on 3
// to 9 goroutine ranks in the layouts of hierLayouts, with the thresholds
// at their defaults and lowered (the leaders' algorithms for large
// vectors), and the hierarchical forms counted; Barrier and the
// nonblocking and persistent forms of the four hierarchical collectives
// too.
func TestCollHier(t *testing.T) {
	for _, low := range []bool{false, true} {
		for n := 3; n <= 9; n++ {
			for name, hosts := range hierLayouts(n) {
				if h := len(slices.Compact(slices.Sorted(slices.Values(hosts)))); h == n {
					continue // a host each: flat
				}
				t.Run(fmt.Sprintf("low=%v/n=%d/%s", low, n, name), func(t *testing.T) {
					if low {
						defer lowThresholds(t)()
					} else {
						testcvar.Set(t, "mpi_coll_shm", "false") // the ranks share memory: the area would take Barrier
					}
					b, bc, rd, ar := pvHierBarrier.Value(), pvHierBcast.Value(), pvHierReduce.Value(), pvHierAllreduce.Value()
					var blocked, aligned bool
					err := Run(n, func(c *Comm) error {
						withHosts(c, hosts)
						h := c.hier()
						if h == nil {
							return errors.New("no hierarchy")
						}
						if c.Rank() == 0 {
							blocked, aligned = h.blocked, h.aligned
						}
						for _, m := range []int{0, 4, 40, 1000} {
							if err := collCheck(c, m); err != nil {
								return err
							}
						}
						return hierForms(c)
					})
					if err != nil {
						t.Fatal(err)
					}
					if pvHierBarrier.Value() == b || pvHierBcast.Value() == bc {
						t.Error("no Barrier or no Bcast ran hierarchically")
					}
					if (pvHierReduce.Value() > rd) != !blocked || (pvHierAllreduce.Value() > ar) != !aligned {
						t.Errorf("hierarchical Reduces %d, Allreduces %d, on consecutive ranks %v, aligned %v",
							pvHierReduce.Value()-rd, pvHierAllreduce.Value()-ar, blocked, aligned)
					}
				})
			}
		}
	}
}

// hierForms runs Barrier, and the nonblocking and persistent forms of
// Bcast and Allreduce and Ireduce, Ibarrier, all at once, on c.
func hierForms(c *Comm) error {
	n, r := c.Size(), c.Rank()
	if err := c.Barrier(); err != nil {
		return fmt.Errorf("Barrier: %w", err)
	}
	b := []int64{int64(r)}
	sum, red := make([]int64, 3), make([]int64, 3)
	rb, err := Ibcast(c, b, n-1)
	if err != nil {
		return err
	}
	ra, err := Iallreduce(c, []int64{1, int64(r), 2}, sum, Sum)
	if err != nil {
		return err
	}
	rr, err := Ireduce(c, []int64{int64(r), 1, 0}, red, Max, 1)
	if err != nil {
		return err
	}
	ri, err := c.Ibarrier()
	if err != nil {
		return err
	}
	if _, err := Waitall([]*Request{rb, ra, rr, ri}); err != nil {
		return fmt.Errorf("Waitall: %w", err)
	}
	if b[0] != int64(n-1) || !slices.Equal(sum, []int64{int64(n), int64(n * (n - 1) / 2), int64(2 * n)}) {
		return fmt.Errorf("Ibcast %v, Iallreduce %v", b, sum)
	}
	if r == 1 && !slices.Equal(red, []int64{int64(n - 1), 1, 0}) {
		return fmt.Errorf("Ireduce %v", red)
	}
	x, y := []float64{float64(r)}, make([]float64, 1)
	p, err := AllreduceInit(c, x, y, Sum)
	if err != nil {
		return err
	}
	defer p.Free()
	for k := range 3 {
		x[0] = float64(r + k)
		if err := p.Start(); err != nil {
			return err
		}
		if _, err := p.Wait(); err != nil {
			return err
		}
		if want := float64(n*(n-1)/2 + n*k); y[0] != want {
			return fmt.Errorf("AllreduceInit, start %d: %v, want %v", k, y[0], want)
		}
	}
	return nil
}

// TestCollHierChoice: Reduce and Allreduce run hierarchically only where
// they should (hierFor): not with mpi_coll_hier off, not above
// mpi_coll_hier_max, not on ranks each on a host of its own or all on
// one; a Reduce only on hosts whose ranks are not consecutive, an
// Allreduce unless they are and as many on each, a power of two; a
// non-commutative operation only on consecutive ranks.
func TestCollHierChoice(t *testing.T) {
	testcvar.Set(t, "mpi_coll_shm", "false")
	n := 6
	l := hierLayouts(n)
	blocks, cyclic, uneven := l["blocks"], l["cyclic"], l["uneven"] // aligned; scattered; consecutive, 1, 3 and 2 a host
	own, one := make([]int32, n), make([]int32, n)
	for r := range own {
		own[r] = int32(r)
	}
	run := func(reduce bool, hosts []int32, op ReduceOp, elems int) bool {
		pv := pvHierAllreduce
		if reduce {
			pv = pvHierReduce
		}
		before := pv.Value()
		err := Run(n, func(c *Comm) error {
			withHosts(c, hosts)
			out := make([]uint64, elems)
			if reduce {
				return Reduce(c, make([]uint64, elems), out, op, 1)
			}
			return Allreduce(c, make([]uint64, elems), out, op)
		})
		if err != nil {
			t.Fatal(err)
		}
		return pv.Value() > before
	}
	mat := NewReduceOp(matmul, false)
	for _, tc := range []struct {
		name   string
		reduce bool
		hosts  []int32
		op     ReduceOp
		elems  int
		hier   bool
	}{
		{"Allreduce aligned", false, blocks, Sum, 4, false},
		{"Allreduce consecutive", false, uneven, Sum, 4, true},
		{"Allreduce consecutive non-commutative", false, uneven, mat, 4, true},
		{"Allreduce scattered", false, cyclic, Sum, 4, true},
		{"Allreduce scattered non-commutative", false, cyclic, mat, 4, false},
		{"Allreduce a host each", false, own, Sum, 4, false},
		{"Allreduce one host", false, one, Sum, 4, false},
		{"Allreduce one host (no table)", false, nil, Sum, 4, false},
		{"Allreduce over mpi_coll_hier_max", false, uneven, Sum, 1 << 10, false},
		{"Reduce consecutive", true, uneven, Sum, 4, false},
		{"Reduce scattered", true, cyclic, Sum, 4, true},
		{"Reduce scattered non-commutative", true, cyclic, mat, 4, false},
		{"Reduce over mpi_coll_hier_max", true, cyclic, Sum, 1 << 10, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			testcvar.Set(t, "mpi_coll_hier_max", "4096")
			if got := run(tc.reduce, tc.hosts, tc.op, tc.elems); got != tc.hier {
				t.Errorf("ran hierarchically %v, want %v", got, tc.hier)
			}
		})
	}
	t.Run("off", func(t *testing.T) {
		testcvar.Set(t, "mpi_coll_hier", "false")
		if run(false, cyclic, Sum, 4) || run(true, cyclic, Sum, 4) {
			t.Error("ran hierarchically with mpi_coll_hier off")
		}
	})
}

// TestCollHierMismatch: a Bcast whose length differs on one rank, in a
// hierarchy, fails with a count error on the ranks that see it and the
// ones below them, and hangs none; the communicator goes on.
func TestCollHierMismatch(t *testing.T) {
	testcvar.Set(t, "mpi_coll_shm", "false")
	const n = 6
	var failed atomic.Int32
	err := Run(n, func(c *Comm) error {
		withHosts(c, hierLayouts(n)["blocks"])
		c.SetErrhandler(ErrorsReturn)
		m := 8
		if c.Rank() == 3 {
			m = 4
		}
		err := Bcast(c, make([]int64, m), 0)
		switch {
		case err == nil:
		case errors.Is(err, ErrTruncate), errors.Is(err, ErrCount):
			failed.Add(1)
		default:
			return fmt.Errorf("rank %d: %v", c.Rank(), err)
		}
		out := make([]int64, 1)
		if err := Allreduce(c, []int64{1}, out, Sum); err != nil || out[0] != n {
			return fmt.Errorf("rank %d: Allreduce after: %v, %v", c.Rank(), out, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if failed.Load() == 0 {
		t.Error("no rank saw the mismatch")
	}
}

// TestCollHierRankGone: with a rank gone, a leader or not, the
// hierarchical Allreduce and Barrier, which need every rank, fail on every
// rank left (ErrProcFailed where the gone rank is the peer, a count error
// where the error came along the data), and hang none; a Bcast returns.
func TestCollHierRankGone(t *testing.T) {
	testcvar.Set(t, "mpi_coll_shm", "false")
	for _, gone := range []int{3, 4} { // not a leader; a leader
		t.Run(fmt.Sprint(gone), func(t *testing.T) {
			const n = 6
			var failed atomic.Int32
			err := Run(n, func(c *Comm) error {
				withHosts(c, hierLayouts(n)["blocks"])
				if c.Rank() == gone {
					return nil
				}
				c.SetErrhandler(ErrorsReturn)
				check := func(name string, err error) error { return goneErr(c, &failed, name, err) }
				out := make([]float64, 16)
				if err := check("Allreduce", Allreduce(c, make([]float64, 16), out, Sum)); err != nil {
					return err
				}
				if err := check("Barrier", c.Barrier()); err != nil {
					return err
				}
				Bcast(c, out, 0)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if failed.Load() == 0 {
				t.Error("no rank got ErrProcFailed")
			}
		})
	}
}

// TestCollHierAllocs: a blocking hierarchical collective allocates nothing
// in steady state, whether its schedule is kept from the last call or
// built again (roots that alternate, a Barrier, vectors just over
// maxKeptBytes), on a layout where all four run hierarchically.
func TestCollHierAllocs(t *testing.T) {
	skipCollAllocs(t)
	testcvar.Set(t, "mpi_coll_shm", "false")
	const n = 6
	err := Run(n, func(c *Comm) error {
		withHosts(c, hierLayouts(n)["cyclic"])
		small, out := []float64{1}, make([]float64, 1)
		const m = maxKeptBytes/16 + 8 // float64s: send and recv together just over maxKeptBytes
		big, bigOut := make([]float64, m), make([]float64, m)
		root := 0
		cases := []struct {
			name string
			fn   func() error
		}{
			{"Allreduce8", func() error { return Allreduce(c, small, out, Sum) }},
			{"Allreduce32K", func() error { return Allreduce(c, big, bigOut, Sum) }},
			{"Bcast8", func() error { root = (root + 3) % n; return Bcast(c, small, root) }},
			{"Reduce8", func() error { root = (root + 5) % n; return Reduce(c, small, out, Max, root) }},
			{"Reduce32K", func() error { return Reduce(c, big, bigOut, Sum, 3) }},
			{"Barrier", c.Barrier},
		}
		for _, k := range cases {
			allocs, err := leastAllocs(50, k.fn)
			if err != nil {
				return err
			}
			if allocs != 0 && c.Rank() == 0 {
				t.Errorf("%s allocates %v times a call", k.name, allocs)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
