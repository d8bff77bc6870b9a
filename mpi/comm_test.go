package mpi

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"

	"github.com/tachyon-hpc/tachyon/internal/testskip"
)

var scComms = scenario("comms", func(c *Comm) error {
	n, me := c.Size(), c.Rank()
	// Split into even and odd ranks, ordered by descending rank.
	sub, err := c.Split(me%2, -me)
	if err != nil {
		return err
	}
	want := (n - me%2 + 1) / 2
	if me%2 == 1 {
		want = n / 2
	}
	if sub.Size() != want {
		return fmt.Errorf("split: size %d, want %d", sub.Size(), want)
	}
	// The highest rank of each color is rank 0 of its communicator.
	top := n - 1
	if top%2 != me%2 {
		top--
	}
	if sub.Rank() != (top-me)/2 {
		return fmt.Errorf("split: rank %d in sub, want %d", sub.Rank(), (top-me)/2)
	}
	// Messages on sub do not match receives on c, and vice versa.
	if sub.Size() > 1 {
		peer := (sub.Rank() + 1) % sub.Size()
		from := (sub.Rank() - 1 + sub.Size()) % sub.Size()
		if err := sub.Send([]byte{byte(me)}, peer, 7); err != nil {
			return err
		}
		if _, ok, _ := c.Iprobe(AnySource, 7); ok {
			return fmt.Errorf("a message on the split communicator matched on its parent")
		}
		buf := make([]byte, 1)
		st, err := sub.Recv(buf, from, 7)
		if err != nil {
			return err
		}
		if st.Source != from {
			return fmt.Errorf("status source %d, want %d", st.Source, from)
		}
	}
	// Undefined color.
	color := 0
	if me == 0 {
		color = Undefined
	}
	none, err := c.Split(color, 0)
	if err != nil {
		return err
	}
	if (me == 0) != (none == nil) {
		return fmt.Errorf("split with Undefined: %v", none)
	}
	// Dup: same group, own context.
	d, err := c.Dup()
	if err != nil {
		return err
	}
	if r, _ := Compare(c, d); r != Congruent {
		return fmt.Errorf("compare dup: %d", r)
	}
	if r, _ := Compare(c, c); r != Ident {
		return fmt.Errorf("compare self: %d", r)
	}
	// Create from a group of the first two ranks.
	g, _ := c.Group()
	g2, err := g.Incl([]int{1, 0})
	if err != nil {
		return err
	}
	cc, err := c.Create(g2)
	if err != nil {
		return err
	}
	if me < 2 {
		if cc == nil || cc.Rank() != 1-me || cc.Size() != 2 {
			return fmt.Errorf("create: %v", cc)
		}
		if err := cc.Barrier(); err != nil {
			return err
		}
		cc.Free()
		if err := cc.Send(nil, 0, 0); !errors.Is(err, ErrComm) {
			return fmt.Errorf("send on a freed communicator: %v", err)
		}
	} else if cc != nil {
		return fmt.Errorf("create gave a non-member a communicator")
	}
	if err := c.Free(); !errors.Is(err, ErrComm) && c.Name() == "MPI_COMM_WORLD" {
		return fmt.Errorf("freeing World: %v", err)
	}
	sub.Free()
	d.Free()
	return c.Barrier()
})

func TestComms(t *testing.T) { both(t, 4, scComms) }

var scSelf = scenario("self", func(c *Comm) error {
	if c.WtimeIsGlobal() != (c.WtimeSkew() <= wtimeGlobalBound.Get().Seconds()) {
		return fmt.Errorf("WtimeIsGlobal %v with ranks %v apart", c.WtimeIsGlobal(), c.WtimeSkew())
	}
	if Wtick() <= 0 || Wtick() > 1e-3 {
		return fmt.Errorf("Wtick %v", Wtick())
	}
	t0 := Wtime()
	if t1 := Wtime(); t1 < t0 {
		return fmt.Errorf("Wtime went back")
	}
	return nil
})

func TestSelf(t *testing.T) { both(t, 2, scSelf) }

// TestMainWithoutLauncher: started alone, Main runs the ranks as
// goroutines (as a launched job, the harness's processes cover Init).
func TestMainWithoutLauncher(t *testing.T) {
	if Launched() {
		testskip.Skip(t, testskip.Launched, "this test process was started by a launcher")
	}
	var ranks [3]bool
	err := Main(3, func(w *Comm) error {
		ranks[w.Rank()] = true
		return w.Barrier()
	})
	if err != nil || ranks != [3]bool{true, true, true} {
		t.Fatalf("Main: %v, ranks %v", err, ranks)
	}
	if err := Main(2, func(w *Comm) error { return errFinalized }); err != errFinalized {
		t.Fatalf("Main's error: %v", err)
	}
}

// TestSetNameConcurrent: at ThreadMultiple, goroutines of one rank name a
// communicator and read its name and errors at once (run under -race);
// every name read is one that was set whole.
func TestSetNameConcurrent(t *testing.T) {
	if err := Run(1, func(c *Comm) error {
		d, err := c.Dup()
		if err != nil {
			return err
		}
		names := map[string]bool{"": true, "alpha": true, "a longer name, beta": true}
		if err := concurrently(4, 2000, func(g, i int) error {
			switch {
			case g%2 == 0 && i%2 == 0:
				return d.SetName("alpha")
			case g%2 == 0:
				return d.SetName("a longer name, beta")
			}
			if n := d.Name(); !names[n] {
				return fmt.Errorf("read name %q", n)
			}
			if l := d.label(); !names[l] && !strings.HasPrefix(l, "context ") {
				return fmt.Errorf("label %q", l)
			}
			return nil
		}); err != nil {
			return err
		}
		return d.Free()
	}); err != nil {
		t.Fatal(err)
	}
}

// concurrently runs fn(g, i) for i below n in each of g goroutines at
// once and returns the first error.
func concurrently(goroutines, n int, fn func(g, i int) error) error {
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range n {
				if err := fn(g, i); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// One clock for a job (WtimeIsGlobal): the ranks of a Run world share
// their process's (no skew); the processes of a shared-memory job start
// theirs as the segment creator's, and Init measures how far they may
// disagree: well under a millisecond (apart, clocks start milliseconds
// apart), and under a microsecond unless the ranks share CPUs, as a test
// run alongside others may. Rank 0 stamps Wtime and sends it, rank 1
// stamps on receipt and answers: no stamp taken before another is later
// than it by more than the bound, in both directions.
var scGlobalClock = scenario("global-clock", func(c *Comm) error {
	bound := c.WtimeSkew()
	if !(bound < 1e-3) || c.WtimeIsGlobal() != (bound <= wtimeGlobalBound.Get().Seconds()) {
		return fmt.Errorf("WtimeIsGlobal %v, bound %v s", c.WtimeIsGlobal(), bound)
	}
	if v, ok, err := c.Attr(AttrWtimeIsGlobal); v != c.WtimeIsGlobal() || !ok || err != nil {
		return fmt.Errorf("MPI_WTIME_IS_GLOBAL: %v %v %v", v, ok, err)
	}
	b := make([]byte, 8)
	for range 100 {
		if c.Rank() == 0 {
			t0 := Wtime()
			binary.LittleEndian.PutUint64(b, math.Float64bits(t0))
			if err := c.Send(b, 1, 1); err != nil {
				return err
			}
			if _, err := c.Recv(b, 1, 2); err != nil {
				return err
			}
			t3 := Wtime()
			if t2 := math.Float64frombits(binary.LittleEndian.Uint64(b)); t2 > t3+bound {
				return fmt.Errorf("rank 1 stamped %v, after rank 0's later %v (bound %v)", t2, t3, bound)
			}
		} else if c.Rank() == 1 {
			if _, err := c.Recv(b, 0, 1); err != nil {
				return err
			}
			t1 := Wtime()
			if t0 := math.Float64frombits(binary.LittleEndian.Uint64(b)); t0 > t1+bound {
				return fmt.Errorf("rank 0 stamped %v, after rank 1's later %v (bound %v)", t0, t1, bound)
			}
			binary.LittleEndian.PutUint64(b, math.Float64bits(Wtime()))
			if err := c.Send(b, 0, 2); err != nil {
				return err
			}
		}
	}
	return nil
})

func TestGlobalClock(t *testing.T) {
	if err := Run(3, func(c *Comm) error {
		if c.WtimeSkew() != 0 || !c.WtimeIsGlobal() {
			return fmt.Errorf("a Run world's ranks %v apart", c.WtimeSkew())
		}
		return scenarios[scGlobalClock](c)
	}); err != nil {
		t.Fatal(err)
	}
	runProcesses(t, 2, scGlobalClock)
}

// TestClockStartedEarly: a process that read Wtime before Init keeps its
// own clock: Init aligns it, but where it shares memory with rank 0 nothing
// follows its drift, so no rank reports the clock global (over the network
// it is steered, and the bound says how well).
func TestClockStartedEarly(t *testing.T) {
	runProcesses(t, 2, scClockApart, "MPI_TEST_WTIME_EARLY=1")
}

var scClockApart = scenario("clock-apart", func(c *Comm) error {
	if c.p.ep.OverNetwork(1 - c.Rank()) {
		return scenarios[scGlobalClock](c)
	}
	if c.WtimeIsGlobal() || !math.IsInf(c.WtimeSkew(), 1) {
		return fmt.Errorf("rank %d: WtimeIsGlobal with a rank whose clock started before Init (bound %v)", c.Rank(), c.WtimeSkew())
	}
	return nil
})
