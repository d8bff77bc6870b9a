package mpi

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
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
	if c.WtimeIsGlobal() {
		return fmt.Errorf("WtimeIsGlobal")
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
		t.Skip("this test process was started by a launcher")
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
