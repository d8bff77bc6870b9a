package mpi

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/tachyon-hpc/tachyon/cvar"
	"github.com/tachyon-hpc/tachyon/internal/testcvar"
	"github.com/tachyon-hpc/tachyon/internal/testskip"
)

// The shared-memory collectives (collshm.go): the collectives' checks run
// through collective areas on 1 to 9 ranks, in-process and as processes,
// with the default geometry and with slots so small that every message
// goes in chunks around them; on communicators that agree on an area, on
// several at once, without a free area; with ranks whose calls differ, and
// with a rank gone.

// shmCounts returns how many calls the shared-memory path has run.
func shmCounts() uint64 {
	return pvShmBarrier.Value() + pvShmBcast.Value() + pvShmReduce.Value() + pvShmAllreduce.Value()
}

// needAreas skips a test of the collective areas where Run's goroutine
// ranks have none: engine_net_force joins them over the network.
func needAreas(t *testing.T) {
	if v, ok := cvar.Lookup("engine_net_force"); ok && v.String() == "true" {
		testskip.Skip(t, testskip.NetForce, "engine_net_force: Run's ranks share no collective area")
	}
}

// shmData sends the data collectives of up to a slot through the areas
// (mpi_coll_shm_max is 0 by default: only Barrier goes there).
func shmData(t *testing.T) { testcvar.Set(t, "mpi_coll_shm_max", "8192") }

// shmDataEnv is shmData for the ranks of a job.
const shmDataEnv = "TACHYON_MPI_COLL_SHM_MAX=8192"

// tinySlots sets the collective areas' slots to two of 64 bytes, for the
// worlds made after it.
func tinySlots(t *testing.T) {
	testcvar.Set(t, "engine_coll_shm_slots", "2")
	testcvar.Set(t, "engine_coll_shm_slot_bytes", "64")
}

// shmCheck runs the collectives' checks on c, a Dup of it and the halves
// of a Split, and checks that the shared-memory path ran on c's ranks.
func shmCheck(c *Comm) error { return shmCheckSizes(c, 0, 4, 40, 1000) }

// shmCheckSizes is shmCheck with vectors of ms elements.
func shmCheckSizes(c *Comm, ms ...int) error {
	n := c.Size()
	before := shmCounts()
	run := func(c *Comm) error {
		for _, m := range ms {
			if err := collCheck(c, m); err != nil {
				return err
			}
		}
		return c.Barrier()
	}
	if err := run(c); err != nil {
		return err
	}
	d, err := c.Dup()
	if err != nil {
		return err
	}
	if err := run(d); err != nil {
		return fmt.Errorf("a Dup: %w", err)
	}
	h, err := c.Split(c.Rank()%2, 0)
	if err != nil {
		return err
	}
	if err := run(h); err != nil {
		return fmt.Errorf("a half: %w", err)
	}
	for _, x := range []*Comm{d, h} {
		if err := x.Free(); err != nil {
			return err
		}
	}
	if n > 1 && c.p.ep.HostColl() != nil && shmCounts() == before {
		return errors.New("no collective ran through shared memory")
	}
	return nil
}

// TestCollShm: 1 to 9 ranks with the default geometry; with tiny slots
// (messages of up to 40 elements in up to 5 chunks, 2 slots: every chunk
// after the second waits for a slot to be read), and 64 or 3 flag lines,
// on fewer, as lockstep chunks on more ranks than CPUs take long.
func TestCollShm(t *testing.T) {
	shmData(t)
	for n := 1; n <= 9; n++ {
		t.Run(fmt.Sprintf("n=%d", n), func(t *testing.T) {
			if err := Run(n, shmCheck); err != nil {
				t.Fatal(err)
			}
		})
	}
	for _, n := range []int{2, 3, 4, 7} {
		for _, lines := range []string{"64", "3"} { // the default; lines reused at another pace than slots
			t.Run(fmt.Sprintf("tiny/lines=%s/n=%d", lines, n), func(t *testing.T) {
				tinySlots(t)
				testcvar.Set(t, "engine_coll_shm_lines", lines)
				if err := Run(n, func(c *Comm) error { return shmCheckSizes(c, 0, 4, 40) }); err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}

var scShmCheck = scenario("coll-shm-check", shmCheck)

func TestCollShmProcesses(t *testing.T) {
	for _, n := range []int{2, 3, 5} {
		t.Run(fmt.Sprint(n), func(t *testing.T) { runProcesses(t, n, scShmCheck, shmDataEnv) })
	}
	t.Run("tiny", func(t *testing.T) {
		runProcesses(t, 4, scShmCheck, shmDataEnv, "TACHYON_ENGINE_COLL_SHM_SLOTS=2", "TACHYON_ENGINE_COLL_SHM_SLOT_BYTES=64", "TACHYON_ENGINE_COLL_SHM_LINES=3")
	})
}

// TestCollShmConcurrent: goroutines of each rank run collectives on
// communicators of their own at once, each through its own area.
func TestCollShmConcurrent(t *testing.T) {
	shmData(t)
	tinySlots(t)
	const k = 4
	err := Run(5, func(c *Comm) error {
		comms := make([]*Comm, k)
		for i := range comms {
			var err error
			if comms[i], err = c.Dup(); err != nil {
				return err
			}
		}
		errs := make([]error, k)
		var wg sync.WaitGroup
		for i, d := range comms {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for it := 0; it < 50 && errs[i] == nil; it++ {
					v := []int64{int64(d.Rank() + i + it), int64(i)}
					out := make([]int64, 2)
					if err := Allreduce(d, v, out, Sum); err != nil {
						errs[i] = err
						return
					}
					n := int64(d.Size())
					if out[0] != n*(n-1)/2+n*int64(i+it) || out[1] != n*int64(i) {
						errs[i] = fmt.Errorf("communicator %d, iteration %d: %v", i, it, out)
						return
					}
					big := make([]int32, 100+i)
					if d.Rank() == it%d.Size() {
						for j := range big {
							big[j] = int32(i*1000 + j + it)
						}
					}
					if err := Bcast(d, big, it%d.Size()); err != nil {
						errs[i] = err
						return
					}
					if big[99] != int32(i*1000+99+it) {
						errs[i] = fmt.Errorf("communicator %d, iteration %d: bcast %d", i, it, big[99])
						return
					}
					if err := d.Barrier(); err != nil {
						errs[i] = err
					}
				}
			}()
		}
		wg.Wait()
		for _, d := range comms {
			d.Free()
		}
		return errors.Join(errs...)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestCollShmNoArea: with two areas, the world takes one and a Dup the
// other; a second Dup finds none and runs by messages (counted); once the
// first is freed, a third takes its area again.
func TestCollShmNoArea(t *testing.T) {
	needAreas(t)
	shmData(t)
	testcvar.Set(t, "engine_coll_shm_areas", "2")
	none := pvShmNoArea.Value()
	err := Run(3, func(c *Comm) error {
		sum := func(d *Comm) error {
			out := make([]int64, 1)
			if err := Allreduce(d, []int64{1}, out, Sum); err != nil {
				return err
			}
			if out[0] != 3 {
				return fmt.Errorf("sum %d", out[0])
			}
			return nil
		}
		var ds []*Comm
		for i := 0; i < 3; i++ {
			if i == 2 {
				if err := ds[0].Free(); err != nil {
					return err
				}
			}
			d, err := c.Dup()
			if err != nil {
				return err
			}
			if err := sum(d); err != nil {
				return err
			}
			ds = append(ds, d)
			if want := i == 1; (d.shmState == shmOff) != want {
				return fmt.Errorf("Dup %d: shared memory %v", i, d.shmState == shmOn)
			}
		}
		return sum(c)
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := pvShmNoArea.Value() - none; got != 3 {
		t.Errorf("mpi_coll_shm_no_area went up by %d, want 3 (one communicator of 3 ranks)", got)
	}
}

// TestCollShmMismatch: ranks that broadcast or reduce different sizes
// get ErrTruncate or ErrCount where they see it, and the communicator
// goes on, every size of chunks taken alike; ranks that call different
// collectives get errors, no hang, and the communicator's later
// collectives fail.
func TestCollShmMismatch(t *testing.T) {
	needAreas(t)
	shmData(t)
	tinySlots(t)
	err := Run(3, func(c *Comm) error {
		r := c.Rank()
		c.SetErrhandler(ErrorsReturn)
		d, err := c.Dup()
		if err != nil {
			return err
		}
		d.SetErrhandler(ErrorsReturn)
		for _, m := range []int{2, 20} { // one chunk, several
			buf := make([]int64, m+r)
			for i := range buf {
				buf[i] = int64(i)
			}
			err = Bcast(d, buf, 1)
			switch {
			case r == 0 && !errors.Is(err, ErrTruncate), r == 2 && !errors.Is(err, ErrCount), r == 1 && err != nil:
				return fmt.Errorf("rank %d: Bcast of %d elements from a root's %d: %v", r, len(buf), m+1, err)
			}
			if r == 0 && !slices.Equal(buf, []int64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20}[:m]) {
				return fmt.Errorf("rank 0: Bcast truncated to %v", buf)
			}
			err = Reduce(d, make([]int64, m+r), make([]int64, m+r), Sum, 1)
			if r == 1 && err == nil {
				return fmt.Errorf("Reduce of %d elements among %d, %d, %d: no error at the root", m+r, m, m+1, m+2)
			}
			err = Allreduce(d, make([]int64, m+r), make([]int64, m+r), Sum)
			if err == nil {
				return fmt.Errorf("rank %d: Allreduce of %d elements among %d, %d, %d: no error", r, m+r, m, m+1, m+2)
			}
			if !errors.Is(err, ErrTruncate) && !errors.Is(err, ErrCount) {
				return fmt.Errorf("rank %d: Allreduce of differing lengths: %v", r, err)
			}
			// The communicator goes on.
			out := make([]int64, 30)
			if err := Allreduce(d, make([]int64, 30), out, Sum); err != nil {
				return fmt.Errorf("rank %d: Allreduce after a mismatch of %d: %v", r, m, err)
			}
			if err := d.Barrier(); err != nil {
				return fmt.Errorf("rank %d: Barrier after a mismatch of %d: %v", r, m, err)
			}
		}
		if r == 0 {
			err = d.Barrier()
		} else {
			err = Allreduce(d, []int64{1}, make([]int64, 1), Sum)
		}
		if err == nil && r != 0 {
			return fmt.Errorf("rank %d: Allreduce against a Barrier succeeds", r)
		}
		if err := d.Barrier(); err == nil {
			if err := d.Barrier(); err == nil {
				return fmt.Errorf("rank %d: barriers after calls that differ succeed", r)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestCollShmRankGone: a rank that leaves in the middle of a run of
// shared-memory collectives (in-process it returns, and its Finalize
// meets the others' collective; as a process it exits) gives every other
// rank an error and no hang; as processes, ErrProcFailed.
func TestCollShmRankGone(t *testing.T) {
	shmData(t)
	for _, n := range []int{2, 3, 5} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			needAreas(t)
			var failed atomic.Int32
			err := Run(n, func(c *Comm) error {
				return shmRankGone(c, &failed, func() error { return nil }, false)
			})
			if err != nil {
				t.Fatal(err)
			}
			if int(failed.Load()) != n-1 {
				t.Errorf("%d ranks failed, want %d", failed.Load(), n-1)
			}
		})
	}
	t.Run("processes", func(t *testing.T) { runProcesses(t, 3, scShmRankGone, shmDataEnv) })
}

var scShmRankGone = scenario("coll-shm-rank-gone", func(c *Comm) error {
	var failed atomic.Int32
	if err := shmRankGone(c, &failed, func() error { os.Exit(0); return nil }, true); err != nil {
		return err
	}
	Finalize() // fails: a rank is gone
	return errFinalized
})

// shmRankGone runs shared-memory collectives on c until its last rank
// leaves (by leave) after 20 of them; the others' calls after must fail,
// ErrProcFailed among processes, and failed counts the ranks that fail.
func shmRankGone(c *Comm, failed *atomic.Int32, leave func() error, procs bool) error {
	n, r := c.Size(), c.Rank()
	c.SetErrhandler(ErrorsReturn)
	out := make([]float64, 4)
	buf := make([]byte, 1000)
	for it := 0; ; it++ {
		if r == n-1 && it == 20 {
			return leave()
		}
		var err error
		switch it % 4 {
		case 0:
			err = Allreduce(c, []float64{1, 2, 3, 4}, out, Sum)
		case 1:
			err = Bcast(c, buf, n-1)
		case 2:
			err = c.Barrier()
		case 3:
			err = Reduce(c, []float64{1, 2, 3, 4}, out, Max, 0)
		}
		if err == nil {
			if it > 200 {
				return fmt.Errorf("rank %d: 200 collectives after rank %d left succeed", r, n-1)
			}
			continue
		}
		if it < 20 {
			return fmt.Errorf("rank %d, collective %d: %v", r, it, err)
		}
		if !errors.Is(err, ErrProcFailed) && (procs || !errors.Is(err, ErrCount)) {
			return fmt.Errorf("rank %d: %v, want ErrProcFailed", r, err)
		}
		failed.Add(1)
		// The communicator's later collectives fail at once.
		if err := c.Barrier(); err == nil {
			return fmt.Errorf("rank %d: a barrier after a failure succeeds", r)
		}
		return nil
	}
}

// TestCollShmLarge: a message just over and under mpi_coll_shm_max runs
// by messages and through shared memory, with the same result.
func TestCollShmLarge(t *testing.T) {
	needAreas(t)
	testcvar.Set(t, "mpi_coll_shm_max", "4096")
	testcvar.Set(t, "mpi_coll_shm_allreduce_small", "0") // mpi_coll_shm_max alone decides
	testcvar.Set(t, "mpi_coll_shm_over_max", "0")
	err := Run(3, func(c *Comm) error {
		for _, m := range []int{512, 513} {
			before := pvShmAllreduce.Value()
			v := vec(c.Rank(), m)
			out := make([]int64, m)
			if err := Allreduce(c, v, out, Sum); err != nil {
				return err
			}
			want := make([]int64, m)
			for k := range 3 {
				for i, x := range vec(k, m) {
					want[i] += x
				}
			}
			if !slices.Equal(out, want) {
				return fmt.Errorf("Allreduce of %d: wrong", m)
			}
			if err := c.Barrier(); err != nil { // every rank has counted
				return err
			}
			if shm := pvShmAllreduce.Value() > before; shm != (m == 512) {
				return fmt.Errorf("Allreduce of %d bytes through shared memory: %v", 8*m, shm)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestCollShmAllocs: the blocking collectives through the areas allocate
// nothing in steady state.
func TestCollShmAllocs(t *testing.T) {
	needAreas(t)
	if raceEnabled {
		testskip.Skip(t, testskip.RaceDetector, "the race detector allocates")
	}
	if intercepted() {
		testskip.Skip(t, testskip.Intercepted, "an interceptor is registered for the whole run")
	}
	shmData(t)
	testcvar.Set(t, "mpi_coll_shm_allreduce_oversubscribed", "true") // the reduce-scatter too, on 3 ranks
	before := shmCounts()
	err := Run(3, func(c *Comm) error {
		small, out := []float64{1}, make([]float64, 1)
		big, bigOut := make([]float64, 1000), make([]float64, 1000)
		long := int(collShmAllreduceLong.Get()) / 8 // the reduce-scatter's
		huge, hugeOut := make([]float64, long), make([]float64, long)
		for _, fn := range []func() error{
			c.Barrier,
			func() error { return Allreduce(c, small, out, Sum) },
			func() error { return Allreduce(c, big, bigOut, Sum) },
			func() error { return Allreduce(c, huge, hugeOut, Sum) },
			func() error { return Allreduce(c, nil, hugeOut, Max) },
			func() error { return Bcast(c, big, 1) },
			func() error { return Reduce(c, big, bigOut, Max, 2) },
		} {
			if err := fn(); err != nil { // the area's agreement, the first time
				return err
			}
			allocs, err := leastAllocs(100, fn)
			if err != nil {
				return err
			}
			if allocs != 0 {
				return fmt.Errorf("%v allocations a call", allocs)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if shmCounts() == before {
		t.Error("no collective ran through shared memory")
	}
}
