package mpi

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
)

// The examples of MPI-4.1 section 11.2.2 (Examples 8.3-8.11 of the MPI
// standard's text).

var scEx83 = scenario("ex8.3", func(c *Comm) error {
	if c.Rank() == 0 {
		return c.Send([]byte("hello"), 1, 0)
	}
	_, err := c.Recv(make([]byte, 5), 0, 0)
	return err
})

func TestExample83(t *testing.T) { both(t, 2, scEx83) }

// Example 8.5: an Isend freed before completion still arrives.
var scEx85 = scenario("ex8.5", func(c *Comm) error {
	if c.Rank() == 0 {
		r, err := c.Isend(pattern(50000, 5), 1, 0)
		if err != nil {
			return err
		}
		if err := r.Free(); err != nil {
			return err
		}
		return c.Barrier()
	}
	buf := make([]byte, 50000)
	if _, err := c.Recv(buf, 0, 0); err != nil {
		return err
	}
	if string(buf) != string(pattern(50000, 5)) {
		return fmt.Errorf("wrong data")
	}
	return c.Barrier()
})

func TestExample85(t *testing.T) { both(t, 2, scEx85) }

// Example 8.8: Finalize delivers a buffered send, as an implicit detach.
var scEx88 = scenario("ex8.8", func(c *Comm) error {
	if c.Rank() == 0 {
		if err := c.BufferAttach(make([]byte, 1000000)); err != nil {
			return err
		}
		return c.Bsend(pattern(200000, 8), 1, 0)
	}
	buf := make([]byte, 200000)
	_, err := c.Recv(buf, 0, 0)
	return err
})

func TestExample88(t *testing.T) { both(t, 2, scEx88) }

// Example 8.10: Iprobe of another tag is false; the cancel of the
// unreceived send succeeds whatever the order of Cancel and rank 1's
// Finalize.
var scEx810 = scenario("ex8.10", func(c *Comm) error {
	if c.Rank() == 0 {
		r, err := c.Isend(pattern(10, 1), 1, 1)
		if err != nil {
			return err
		}
		if err := c.Barrier(); err != nil {
			return err
		}
		if err := c.Barrier(); err != nil {
			return err
		}
		if err := r.Cancel(); err != nil {
			return err
		}
		st, err := r.Wait()
		if err != nil || !st.Cancelled {
			return fmt.Errorf("cancel: %+v %v", st, err)
		}
		return nil
	}
	if err := c.Barrier(); err != nil {
		return err
	}
	if _, ok, err := c.Iprobe(0, 2); ok || err != nil {
		return fmt.Errorf("iprobe(tag2): %v %v", ok, err)
	}
	return c.Barrier()
})

func TestExample810(t *testing.T) { both(t, 2, scEx810) }

// Example 8.11: rank 1 finalizes at once; rank 0's cancel must succeed.
var scEx811 = scenario("ex8.11", func(c *Comm) error {
	if c.Rank() == 0 {
		for _, n := range []int{10, 100000} { // eager and rendezvous
			r, err := c.Isend(pattern(n, 1), 1, 1)
			if err != nil {
				return err
			}
			if err := r.Cancel(); err != nil {
				return err
			}
			st, err := r.Wait()
			if err != nil || !st.Cancelled {
				return fmt.Errorf("%d bytes: cancel: %+v %v", n, st, err)
			}
		}
	}
	return nil
})

func TestExample811(t *testing.T) { both(t, 2, scEx811) }

// After Finalize every routine but Version, Initialized and Finalized
// returns ErrNotInitialized.
var scAfter = scenario("after-finalize", func(c *Comm) error {
	if err := c.Finalize(); err != nil {
		return err
	}
	checks := map[string]error{
		"Send":    c.Send(nil, 0, 0),
		"Barrier": c.Barrier(),
		"Recv":    func() error { _, err := c.Recv(nil, 0, 0); return err }(),
		"Dup":     func() error { _, err := c.Dup(); return err }(),
	}
	for name, err := range checks {
		if !errors.Is(err, ErrNotInitialized) {
			return fmt.Errorf("%s after Finalize: %v", name, err)
		}
	}
	if c == World() {
		if !Finalized() || !Initialized() {
			return fmt.Errorf("Finalized %v Initialized %v", Finalized(), Initialized())
		}
		if err := Init(); !errors.Is(err, ErrNotInitialized) {
			return fmt.Errorf("Init after Finalize: %v", err)
		}
		if _, err := TimerCreate(1); !errors.Is(err, ErrNotInitialized) {
			return fmt.Errorf("TimerCreate after Finalize: %v", err)
		}
	}
	if m, _ := Version(); m != 4 {
		return fmt.Errorf("version %d", m)
	}
	return errFinalized
})

// errFinalized tells the harness the scenario finalized itself.
var errFinalized = errors.New("finalized")

func TestAfterFinalize(t *testing.T) {
	if err := Run(2, scenarios[scAfter]); err != errFinalized {
		t.Fatal(err)
	}
	runProcesses(t, 2, scAfter)
}

// TestFinalizeOneClass: Finalize whose closing barrier fails, because the
// other rank left without Finalize, returns an error that matches one
// class alone, ErrProcFailed, in-process and across processes.
func TestFinalizeOneClass(t *testing.T) {
	if err := Run(2, func(c *Comm) error {
		if c.Rank() == 1 {
			return nil // leaves without Finalize
		}
		return finalizedAlone(c.Finalize())
	}); err != nil {
		t.Fatal(err)
	}
	runProcesses(t, 2, scFinalizeAlone)
}

var scFinalizeAlone = scenario("finalize-alone", func(c *Comm) error {
	if c.Rank() == 1 {
		os.Exit(0) // leaves without Finalize
	}
	if err := finalizedAlone(Finalize()); err != nil {
		return err
	}
	return errFinalized
})

// finalizedAlone checks the error of a Finalize that found its peer gone.
func finalizedAlone(err error) error {
	if err == nil {
		return errors.New("Finalize succeeded without the other rank")
	}
	var matched []error
	for _, cls := range classes {
		if errors.Is(err, cls) {
			matched = append(matched, cls)
		}
	}
	if len(matched) != 1 || matched[0] != ErrProcFailed || ErrorClass(err) != ErrProcFailed {
		return fmt.Errorf("Finalize's error %q matches %v, class %v; want ErrProcFailed alone", err, matched, ErrorClass(err))
	}
	return nil
}

// TestPackageRoutinesInRun: the package-level routines that need the
// process's MPI, called from a rank of Run, fail with ErrNotInitialized
// and name the World's method to call instead; outside Run they only say
// MPI is not initialized.
func TestPackageRoutinesInRun(t *testing.T) {
	calls := map[string]func() error{
		"BufferAttach": func() error { return BufferAttach(make([]byte, 100)) },
		"BufferDetach": func() error { _, err := BufferDetach(); return err },
		"Finalize":     Finalize,
	}
	for name, call := range calls {
		if err := call(); !errors.Is(err, ErrNotInitialized) || strings.Contains(err.Error(), "Run") {
			t.Errorf("%s outside Run: %v", name, err)
		}
	}
	if err := Run(2, func(c *Comm) error {
		for name, call := range calls {
			err := call()
			if !errors.Is(err, ErrNotInitialized) || !strings.Contains(err.Error(), "c."+name) {
				return fmt.Errorf("%s in a rank of Run: %v", name, err)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// Examples 8.4 and 8.6 and an unmatched receive: Finalize in an erroneous
// program says what was left, on the rank that has it, and returns on
// every rank.

// leftoverFinalize finalizes c's rank and checks its error: nil if want
// is empty, else ErrOther naming each of want.
func leftoverFinalize(c *Comm, want ...string) error {
	err := c.Finalize()
	if len(want) == 0 {
		if err != nil {
			return fmt.Errorf("rank %d: Finalize: %v", c.Rank(), err)
		}
		return errFinalized
	}
	if !errors.Is(err, ErrOther) || ErrorClass(err) != ErrOther {
		return fmt.Errorf("rank %d: Finalize returned %v, want ErrOther naming %q", c.Rank(), err, want)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			return fmt.Errorf("rank %d: Finalize's error %q does not say %q", c.Rank(), err, w)
		}
	}
	return errFinalized
}

// Example 8.4: a message no receive takes.
var scEx84 = scenario("ex8.4", func(c *Comm) error {
	if c.Rank() == 0 {
		if err := c.Send([]byte("hello"), 1, 0); err != nil {
			return err
		}
		return leftoverFinalize(c)
	}
	return leftoverFinalize(c, "left 1 operation(s) unfinished", "a message from rank 0, tag 0, 5 bytes, on MPI_COMM_WORLD, that no receive took")
})

// Example 8.4 with a rendezvous message, sent by Isend (Send would wait
// for ever): the send is left on one side, the announced message on the
// other.
var scEx84Large = scenario("ex8.4-large", func(c *Comm) error {
	if c.Rank() == 0 {
		if _, err := c.Isend(make([]byte, 1<<20), 1, 3); err != nil {
			return err
		}
		return leftoverFinalize(c, "a send to rank 1, tag 3, 1048576 bytes, on MPI_COMM_WORLD, that no receive finished taking")
	}
	return leftoverFinalize(c, "a message from rank 0, tag 3, 1048576 bytes, on MPI_COMM_WORLD, that no receive took")
})

// A receive no send matches.
var scUnmatchedRecv = scenario("unmatched-recv", func(c *Comm) error {
	if c.Rank() == 1 {
		r, err := c.Irecv(make([]byte, 8), AnySource, 9)
		if err != nil {
			return err
		}
		if err := r.Free(); err != nil {
			return err
		}
		return leftoverFinalize(c, "a receive from any source, tag 9, into 8 bytes, on MPI_COMM_WORLD, still pending (its request freed)")
	}
	return leftoverFinalize(c)
})

// Example 8.6: rank 0 frees an Isend and finalizes with no barrier. The
// standard leaves it undefined; here Finalize's barrier comes after the
// receiver's acknowledgement of the rendezvous, so the send is complete
// when Finalize returns, and neither rank has anything left.
var scEx86 = scenario("ex8.6", func(c *Comm) error {
	if c.Rank() == 0 {
		r, err := c.Isend(pattern(50000, 6), 1, 0)
		if err != nil {
			return err
		}
		if err := r.Free(); err != nil {
			return err
		}
		return leftoverFinalize(c)
	}
	buf := make([]byte, 50000)
	if _, err := c.Recv(buf, 0, 0); err != nil {
		return err
	}
	if string(buf) != string(pattern(50000, 6)) {
		return errors.New("wrong data")
	}
	return leftoverFinalize(c)
})

func TestExample84(t *testing.T) {
	for _, sc := range []string{scEx84, scEx84Large, scUnmatchedRecv} {
		t.Run(sc, func(t *testing.T) {
			if err := Run(2, scenarios[sc]); err != errFinalized {
				t.Fatal(err)
			}
			runProcesses(t, 2, sc)
		})
	}
}

func TestExample86(t *testing.T) {
	if err := Run(2, scenarios[scEx86]); err != errFinalized {
		t.Fatal(err)
	}
	runProcesses(t, 2, scEx86)
}
