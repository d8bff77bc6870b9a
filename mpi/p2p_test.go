package mpi

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"testing"

	"github.com/tachyon-hpc/tachyon/internal/testskip"
)

func pattern(n, seed int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + seed)
	}
	return b
}

var scRing = scenario("ring", func(c *Comm) error {
	// A message passes around the ring of ranks in every send mode and
	// several sizes, eager and rendezvous.
	n, me := c.Size(), c.Rank()
	next, prev := (me+1)%n, (me-1+n)%n
	if err := c.BufferAttach(make([]byte, 1<<20)); err != nil {
		return err
	}
	for k, size := range []int{0, 8, 3000, 40000, 300000} {
		for mode := 0; mode < 4; mode++ {
			tag := k*10 + mode
			msg := pattern(size, tag)
			buf := make([]byte, size)
			send := func() error {
				switch mode {
				case 0:
					return c.Send(msg, next, tag)
				case 1:
					return c.Ssend(msg, next, tag)
				case 2:
					r, err := c.Isend(msg, next, tag)
					if err != nil {
						return err
					}
					_, err = r.Wait()
					return err
				default:
					return c.Bsend(msg, next, tag)
				}
			}
			if me == 0 {
				if err := send(); err != nil {
					return fmt.Errorf("size %d mode %d send: %w", size, mode, err)
				}
			}
			st, err := c.Recv(buf, prev, tag)
			if err != nil {
				return fmt.Errorf("size %d mode %d recv: %w", size, mode, err)
			}
			if st.Source != prev || st.Tag != tag || st.Count != size || !bytes.Equal(buf, msg) {
				return fmt.Errorf("size %d mode %d: status %+v", size, mode, st)
			}
			if me != 0 {
				if err := send(); err != nil {
					return err
				}
			}
		}
	}
	_, err := c.BufferDetach()
	return err
})

func TestRing(t *testing.T) { both(t, 3, scRing) }

var scWildcards = scenario("wildcards", func(c *Comm) error {
	if c.Rank() != 0 {
		for i := 0; i < 5; i++ {
			if err := c.Send(pattern(4, c.Rank()), 0, c.Rank()*100+i); err != nil {
				return err
			}
		}
		return nil
	}
	next := map[int]int{}
	for i := 0; i < 5*(c.Size()-1); i++ {
		buf := make([]byte, 4)
		st, err := c.Recv(buf, AnySource, AnyTag)
		if err != nil {
			return err
		}
		if st.Tag != st.Source*100+next[st.Source] || !bytes.Equal(buf, pattern(4, st.Source)) {
			return fmt.Errorf("out of order from %d: %+v", st.Source, st)
		}
		next[st.Source]++
	}
	return nil
})

func TestWildcards(t *testing.T) { both(t, 3, scWildcards) }

var scProcNull = scenario("procnull", func(c *Comm) error {
	if err := c.Send([]byte("x"), ProcNull, 1); err != nil {
		return err
	}
	st, err := c.Recv(make([]byte, 4), ProcNull, 1)
	if err != nil || st.Source != ProcNull || st.Count != 0 {
		return fmt.Errorf("recv from ProcNull: %+v %v", st, err)
	}
	r, err := c.Irecv(nil, ProcNull, AnyTag)
	if err != nil {
		return err
	}
	if st, err := r.Wait(); err != nil || st.Source != ProcNull {
		return fmt.Errorf("irecv from ProcNull: %+v %v", st, err)
	}
	return nil
})

func TestProcNull(t *testing.T) { both(t, 2, scProcNull) }

var scTruncate = scenario("truncate", func(c *Comm) error {
	if c.Rank() == 1 {
		for _, n := range []int{100, 30000} {
			if err := c.Send(pattern(n, 1), 0, n); err != nil {
				return err
			}
		}
		return nil
	}
	for _, n := range []int{100, 30000} {
		buf := make([]byte, 10)
		st, err := c.Recv(buf, 1, n)
		if !errors.Is(err, ErrTruncate) || st.Count != 10 || !bytes.Equal(buf, pattern(n, 1)[:10]) {
			return fmt.Errorf("%d bytes into 10: %+v %v", n, st, err)
		}
		if ErrorClass(err) != ErrTruncate || errors.Is(err, ErrOther) {
			return fmt.Errorf("class of %v", err)
		}
	}
	return nil
})

func TestTruncate(t *testing.T) { both(t, 2, scTruncate) }

var scProbe = scenario("probe", func(c *Comm) error {
	if c.Rank() == 1 {
		return c.Send(pattern(777, 3), 0, 9)
	}
	st, err := c.Probe(AnySource, AnyTag)
	if err != nil || st.Source != 1 || st.Tag != 9 || st.Count != 777 {
		return fmt.Errorf("probe: %+v %v", st, err)
	}
	if _, ok, err := c.Iprobe(1, 8); ok || err != nil {
		return fmt.Errorf("iprobe of an absent tag: %v %v", ok, err)
	}
	buf := make([]byte, st.Count)
	_, err = c.Recv(buf, st.Source, st.Tag)
	return err
})

func TestProbe(t *testing.T) { both(t, 2, scProbe) }

var scSendrecv = scenario("sendrecv", func(c *Comm) error {
	n, me := c.Size(), c.Rank()
	buf := pattern(50000, me)
	st, err := c.SendrecvReplace(buf, (me+1)%n, 5, (me-1+n)%n, 5)
	if err != nil {
		return err
	}
	if st.Source != (me-1+n)%n || !bytes.Equal(buf, pattern(50000, (me-1+n)%n)) {
		return fmt.Errorf("sendrecv_replace: %+v", st)
	}
	return nil
})

func TestSendrecv(t *testing.T) { both(t, 3, scSendrecv) }

var scPersistent = scenario("persistent", func(c *Comm) error {
	other := 1 - c.Rank()
	out, in := make([]byte, 8), make([]byte, 8)
	sr, err := c.SendInit(out, other, 1)
	if err != nil {
		return err
	}
	rr, err := c.RecvInit(in, other, 1)
	if err != nil {
		return err
	}
	for i := 0; i < 20; i++ {
		out[0] = byte(i)
		reqs := []*Request{rr, sr}
		if err := Startall(reqs); err != nil {
			return err
		}
		if _, err := Waitall(reqs); err != nil {
			return err
		}
		if reqs[0] != rr || in[0] != byte(i) {
			return fmt.Errorf("round %d: got %d", i, in[0])
		}
	}
	if err := rr.Start(); err != nil {
		return err
	}
	if err := rr.Start(); !errors.Is(err, ErrRequest) {
		return fmt.Errorf("start of an active request: %v", err)
	}
	rr.Cancel()
	if st, err := rr.Wait(); err != nil || !st.Cancelled {
		return fmt.Errorf("cancel of persistent receive: %+v %v", st, err)
	}
	sr.Free()
	return rr.Free()
})

func TestPersistent(t *testing.T) { both(t, 2, scPersistent) }

var scWaitany = scenario("waitany", func(c *Comm) error {
	// A timer and a receive in one Waitany: the message wins over a far
	// timer, which is then cancelled.
	other := 1 - c.Rank()
	timer, err := TimerCreate(10)
	if err != nil {
		return err
	}
	r, err := c.Irecv(make([]byte, 8), other, 3)
	if err != nil {
		return err
	}
	if err := c.Send(pattern(8, 0), other, 3); err != nil {
		return err
	}
	reqs := []*Request{timer, r}
	i, _, err := Waitany(reqs)
	if err != nil || i != 1 || reqs[1] != nil {
		return fmt.Errorf("waitany: %d %v", i, err)
	}
	timer.Cancel()
	i, st, err := Waitany(reqs)
	if err != nil || i != 0 || !st.Cancelled {
		return fmt.Errorf("waitany cancelled timer: %d %+v %v", i, st, err)
	}
	if i, _, err := Waitany(reqs); i != Undefined || err != nil {
		return fmt.Errorf("waitany with none active: %d %v", i, err)
	}
	// A near timer wins over a receive nobody satisfies, and is not early.
	t0 := Wtime()
	timer, _ = TimerCreate(0.02)
	never, _ := c.Irecv(nil, other, 99)
	reqs = []*Request{never, timer}
	i, st, err = Waitany(reqs)
	if err != nil || i != 1 || st.Cancelled || Wtime()-t0 < 0.02 {
		return fmt.Errorf("waitany timer: %d %+v %v after %v s", i, st, err, Wtime()-t0)
	}
	never.Cancel()
	if st, err := never.Wait(); err != nil || !st.Cancelled {
		return fmt.Errorf("cancel: %+v %v", st, err)
	}
	// Testany and Waitsome.
	r1, _ := c.Irecv(make([]byte, 8), other, 4)
	if _, _, ok, _ := Testany([]*Request{r1}); ok {
		return fmt.Errorf("testany: complete before the send")
	}
	if err := c.Barrier(); err != nil { // nobody sends tag 4 before this
		return err
	}
	c.Send(pattern(8, 0), other, 4)
	idx, _, err := Waitsome([]*Request{r1})
	if err != nil || len(idx) != 1 {
		return fmt.Errorf("waitsome: %v %v", idx, err)
	}
	return c.Barrier()
})

func TestWaitany(t *testing.T) { both(t, 2, scWaitany) }

var scCancel = scenario("cancel", func(c *Comm) error {
	r, err := c.Irecv(make([]byte, 8), AnySource, 42)
	if err != nil {
		return err
	}
	if err := r.Cancel(); err != nil {
		return err
	}
	st, err := r.Wait()
	if err != nil || !st.Cancelled {
		return fmt.Errorf("cancelled receive: %+v %v", st, err)
	}
	timer, _ := TimerCreate(100)
	timer.Cancel()
	if st, err := timer.Wait(); err != nil || !st.Cancelled {
		return fmt.Errorf("cancelled timer: %+v %v", st, err)
	}
	return nil
})

func TestCancel(t *testing.T) { both(t, 2, scCancel) }

var scBadArgs = scenario("badargs", func(c *Comm) error {
	checks := []struct {
		name string
		err  error
		want error
	}{
		{"rank", c.Send(nil, c.Size(), 0), ErrRank},
		{"negative rank", c.Send(nil, -5, 0), ErrRank},
		{"tag", c.Send(nil, 0, -3), ErrTag},
		{"recv tag", func() error { _, err := c.Recv(nil, 0, -7); return err }(), ErrTag},
		{"recv rank", func() error { _, err := c.Recv(nil, c.Size()+1, 0); return err }(), ErrRank},
		{"nil comm", (*Comm)(nil).Send(nil, 0, 0), ErrComm},
		{"bsend without buffer", c.Bsend([]byte("x"), 0, 0), ErrBuffer},
		{"timer NaN", func() error { _, err := TimerCreate(nan()); return err }(), ErrArg},
		{"split color", func() error { _, err := c.Split(-4, 0); return err }(), ErrArg},
	}
	r, _ := c.Irecv(nil, ProcNull, 0)
	r.Free()
	_, err := r.Wait()
	checks = append(checks, struct {
		name string
		err  error
		want error
	}{"freed request", err, ErrRequest})
	for _, k := range checks {
		if !errors.Is(k.err, k.want) {
			return fmt.Errorf("%s: got %v, want class %v", k.name, k.err, k.want)
		}
		n := 0
		for _, cls := range classes {
			if errors.Is(k.err, cls) {
				n++
			}
		}
		if n != 1 {
			return fmt.Errorf("%s: %v matches %d classes", k.name, k.err, n)
		}
	}
	// The world still works.
	return c.Barrier()
})

func nan() float64 { z := 0.0; return z / z }

func TestBadArgs(t *testing.T) { both(t, 2, scBadArgs) }

// TestThreadLevels runs point-to-point scenarios as jobs whose ranks ask
// InitThread for each level: below ThreadMultiple the message path runs
// unlocked (a data race there would show under -race).
func TestThreadLevels(t *testing.T) {
	for lv := ThreadSingle; lv <= ThreadMultiple; lv++ {
		for _, sc := range []struct {
			name string
			n    int
		}{{scRing, 3}, {scWildcards, 3}, {scWaitany, 2}, {scPersistent, 2}, {scCancel, 2}} {
			t.Run(fmt.Sprintf("%d/%s", lv, sc.name), func(t *testing.T) {
				runProcesses(t, sc.n, sc.name, threadEnv+"="+strconv.Itoa(int(lv)))
			})
		}
	}
}

func TestQueryThreadNotInitialized(t *testing.T) {
	if Initialized() {
		testskip.Skip(t, testskip.MPIInitialized, "MPI is initialized in this process")
	}
	if _, err := QueryThread(); !errors.Is(err, ErrNotInitialized) {
		t.Fatalf("QueryThread before Init: %v", err)
	}
}

// TestTimerBeforeInit: in a process that never called Init, a timer
// request completes no earlier than its due time, and cancels.
func TestTimerBeforeInit(t *testing.T) {
	if Initialized() {
		t.Fatal("the test process initialized MPI")
	}
	start := Wtime()
	r, err := TimerCreate(0.002)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Wait(); err != nil {
		t.Fatal(err)
	}
	if el := Wtime() - start; el < 0.002 {
		t.Fatalf("a 2 ms timer completed after %v s", el)
	}
	r, err = TimerCreate(100)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Cancel(); err != nil {
		t.Fatal(err)
	}
	if st, err := r.Wait(); err != nil || !st.Cancelled {
		t.Fatalf("cancelled timer: %+v, %v", st, err)
	}
}
