package mpi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tachyon-hpc/tachyon/cvar"
	"github.com/tachyon-hpc/tachyon/internal/testskip"
)

// canceledBy checks that err is what a Context form returns when its
// context ends: it matches want (context.Canceled or
// context.DeadlineExceeded) and ErrCanceled, and no other class.
func canceledBy(err, want error) error {
	if !errors.Is(err, want) || !errors.Is(err, ErrCanceled) || ErrorClass(err) != ErrCanceled {
		return fmt.Errorf("error %v: want one matching %v and ErrCanceled", err, want)
	}
	n := 0
	for _, c := range classes {
		if errors.Is(err, c) {
			n++
		}
	}
	if n != 1 {
		return fmt.Errorf("error %v matches %d classes", err, n)
	}
	return nil
}

// lossy reports whether the network transport carries this run's ranks
// and loses frames: a sender that stops polling then retransmits nothing.
func lossy() bool {
	if v, ok := cvar.Lookup("engine_net_force"); !ok || v.String() != "true" {
		return false
	}
	v, ok := cvar.Lookup("nic_drop_rate")
	return ok && v.String() != "0"
}

var scRecvContextTimeout = scenario("recv-context-timeout", func(c *Comm) error {
	// A receive whose deadline passes consumes nothing: the message sent
	// afterwards, eager or rendezvous, goes whole to the next receive.
	for i, size := range []int{8, 100000} {
		if c.Rank() == 0 {
			if _, err := c.Recv(nil, 1, 9); err != nil {
				return err
			}
			if err := c.Send(pattern(size, i), 1, 1); err != nil {
				return err
			}
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		buf := make([]byte, size)
		st, err := c.RecvContext(ctx, buf, 0, 1)
		cancel()
		if err := canceledBy(err, context.DeadlineExceeded); err != nil {
			return fmt.Errorf("RecvContext: %w", err)
		}
		if !st.Cancelled {
			return fmt.Errorf("RecvContext's status %+v: want Cancelled", st)
		}
		if err := c.Send(nil, 0, 9); err != nil {
			return err
		}
		if st, err := c.Recv(buf, 0, 1); err != nil || st.Count != size || !bytes.Equal(buf, pattern(size, i)) {
			return fmt.Errorf("the next Recv of %d bytes: %+v %v", size, st, err)
		}
	}
	return nil
})

// TestRecvContextTimeout: a RecvContext that times out matches
// context.DeadlineExceeded and ErrCanceled, and the message sent
// afterwards goes to the next Recv.
func TestRecvContextTimeout(t *testing.T) { both(t, 2, scRecvContextTimeout) }

var scRecvContextCancel = scenario("recv-context-cancel", func(c *Comm) error {
	// A receive parked on its doorbell wakes soon after a cancel.
	if c.Rank() == 0 {
		_, err := c.Recv(nil, 1, 9)
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	var at atomic.Int64
	go func() {
		time.Sleep(100 * time.Millisecond) // long past the spin and pause: parked
		at.Store(time.Now().UnixNano())
		cancel()
	}()
	_, err := c.RecvContext(ctx, nil, 0, 1)
	woke := time.Duration(time.Now().UnixNano() - at.Load())
	if err := canceledBy(err, context.Canceled); err != nil {
		return err
	}
	if woke > 2*time.Second {
		return fmt.Errorf("woke %v after the cancel", woke)
	}
	return c.Send(nil, 0, 9)
})

// TestRecvContextCancelWakes: a RecvContext cancelled while parked wakes
// promptly (within 2 s; about 0.1 ms here).
func TestRecvContextCancelWakes(t *testing.T) { both(t, 2, scRecvContextCancel) }

var scRecvContextMatched = scenario("recv-context-matched", func(c *Comm) error {
	// A message there when the context has ended is received; so is one
	// whose rendezvous matched before the deadline and whose data comes
	// after it (as processes; goroutine ranks copy it as it matches).
	if c.Rank() == 0 {
		if err := c.Send(pattern(100, 1), 1, 1); err != nil {
			return err
		}
		if _, err := c.Recv(nil, 1, 9); err != nil {
			return err
		}
		r, err := c.Isend(pattern(1<<20, 2), 1, 2)
		if err != nil {
			return err
		}
		time.Sleep(150 * time.Millisecond) // not polling: the data waits
		_, err = r.Wait()
		return err
	}
	if _, err := c.Probe(0, 1); err != nil {
		return err
	}
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	buf := make([]byte, 100)
	if st, err := c.RecvContext(ended, buf, 0, 1); err != nil || st.Count != 100 || !bytes.Equal(buf, pattern(100, 1)) {
		return fmt.Errorf("RecvContext of a message there, its context ended: %+v %v", st, err)
	}
	if err := c.Send(nil, 0, 9); err != nil {
		return err
	}
	// The announcement is here before the receive starts (a loaded
	// machine may take longer than the deadline to bring it), so the
	// receive matches at once, and its data comes once the sender polls
	// again, after the deadline.
	if _, err := c.Probe(0, 2); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	buf = make([]byte, 1<<20)
	st, err := c.RecvContext(ctx, buf, 0, 2)
	if err != nil || st.Count != 1<<20 || !bytes.Equal(buf, pattern(1<<20, 2)) {
		return fmt.Errorf("RecvContext of a rendezvous matched in time: %+v %v", st, err)
	}
	return nil
})

// TestRecvContextMatchedWins: a receive whose message matched as its
// context ended returns the message, with no error.
func TestRecvContextMatchedWins(t *testing.T) { both(t, 2, scRecvContextMatched) }

var scSendContextWithdrawn = scenario("send-context-withdrawn", func(c *Comm) error {
	// A rendezvous send, and a synchronous one, that no receive matches
	// before the deadline end with the context's error, and the receiver
	// gets nothing of them: the next message is whole.
	for i, size := range []int{100000, 100} {
		send := c.SendContext
		if i == 1 {
			send = c.SsendContext
		}
		if c.Rank() == 1 {
			if _, err := c.Recv(nil, 0, 9); err != nil { // polling meanwhile: the cancel is answered
				return err
			}
			if _, ok, err := c.Iprobe(0, 1); ok || err != nil {
				return fmt.Errorf("a withdrawn message of %d bytes is there (%v)", size, err)
			}
			if err := c.Send(nil, 0, 10); err != nil {
				return err
			}
			buf := make([]byte, size)
			if st, err := c.Recv(buf, 0, 1); err != nil || st.Count != size || !bytes.Equal(buf, pattern(size, 5)) {
				return fmt.Errorf("the message after: %+v %v", st, err)
			}
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		err := send(ctx, pattern(size, 4), 1, 1)
		cancel()
		if err := canceledBy(err, context.DeadlineExceeded); err != nil {
			return fmt.Errorf("send of %d bytes: %w", size, err)
		}
		if err := c.Send(nil, 1, 9); err != nil {
			return err
		}
		if _, err := c.Recv(nil, 1, 10); err != nil {
			return err
		}
		if err := send(context.Background(), pattern(size, 5), 1, 1); err != nil {
			return err
		}
	}
	return c.Barrier()
})

// TestSendContextWithdrawn: a SendContext of a rendezvous message with no
// receiver ends with the context's error, and the receiver later gets
// nothing half sent.
func TestSendContextWithdrawn(t *testing.T) { both(t, 2, scSendContextWithdrawn) }

var scWaitContext = scenario("wait-context", func(c *Comm) error {
	// Requests whose waits time out stay active; waited again they
	// complete.
	if c.Rank() == 0 {
		for tag := 1; tag <= 6; tag++ {
			if _, err := c.Recv(nil, 1, 9); err != nil {
				return err
			}
			if err := c.Send(pattern(8, tag), 1, tag); err != nil {
				return err
			}
		}
		return nil
	}
	short := func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(context.Background(), 10*time.Millisecond)
	}
	bufs := make([][]byte, 7)
	reqs := make([]*Request, 7)
	for tag := 1; tag <= 6; tag++ {
		bufs[tag] = make([]byte, 8)
		r, err := c.Irecv(bufs[tag], 0, tag)
		if err != nil {
			return err
		}
		reqs[tag] = r
	}
	go1 := func() error { return c.Send(nil, 0, 9) } // let rank 0 send the next message

	// WaitContext.
	ctx, cancel := short()
	_, err := reqs[1].WaitContext(ctx)
	cancel()
	if err := canceledBy(err, context.DeadlineExceeded); err != nil {
		return fmt.Errorf("WaitContext: %w", err)
	}
	if _, done, err := reqs[1].Test(); done || err != nil {
		return fmt.Errorf("the request after WaitContext's timeout: done %v, %v", done, err)
	}
	if err := go1(); err != nil {
		return err
	}
	if st, err := reqs[1].WaitContext(context.Background()); err != nil || st.Tag != 1 || !bytes.Equal(bufs[1], pattern(8, 1)) {
		return fmt.Errorf("WaitContext again: %+v %v", st, err)
	}

	// WaitanyContext and WaitsomeContext: nothing changes on a timeout.
	two := []*Request{reqs[2], reqs[3]}
	ctx, cancel = short()
	i, _, err := WaitanyContext(ctx, two)
	cancel()
	if err := canceledBy(err, context.DeadlineExceeded); err != nil || i != Undefined || two[0] == nil || two[1] == nil {
		return fmt.Errorf("WaitanyContext = %d, %v; requests %v", i, err, two)
	}
	ctx, cancel = short()
	idx, _, err := WaitsomeContext(ctx, two)
	cancel()
	if err := canceledBy(err, context.DeadlineExceeded); err != nil || idx != nil || two[0] == nil {
		return fmt.Errorf("WaitsomeContext = %v, %v", idx, err)
	}
	if err := go1(); err != nil {
		return err
	}
	if i, st, err := WaitanyContext(context.Background(), two); err != nil || i != 0 || st.Tag != 2 || two[0] != nil {
		return fmt.Errorf("WaitanyContext = %d, %+v, %v", i, st, err)
	}
	if err := go1(); err != nil {
		return err
	}
	if idx, sts, err := WaitsomeContext(context.Background(), two); err != nil || len(idx) != 1 || idx[0] != 1 || sts[0].Tag != 3 {
		return fmt.Errorf("WaitsomeContext = %v, %+v, %v", idx, sts, err)
	}

	// WaitallContext: on a timeout every request stays, the complete one
	// too.
	all := []*Request{reqs[4], reqs[5], reqs[6]}
	if err := go1(); err != nil {
		return err
	}
	ctx, cancel = short()
	_, err = WaitallContext(ctx, all)
	cancel()
	if err := canceledBy(err, context.DeadlineExceeded); err != nil || all[0] == nil || all[1] == nil || all[2] == nil {
		return fmt.Errorf("WaitallContext = %v; requests %v", err, all)
	}
	for range 2 {
		if err := go1(); err != nil {
			return err
		}
	}
	sts, err := WaitallContext(context.Background(), all)
	if err != nil || all[0] != nil || all[2] != nil {
		return fmt.Errorf("WaitallContext = %v; requests %v", err, all)
	}
	for k, st := range sts {
		if st.Tag != 4+k || !bytes.Equal(bufs[4+k], pattern(8, 4+k)) {
			return fmt.Errorf("WaitallContext's status %d: %+v", k, st)
		}
	}
	return nil
})

// TestWaitContext: WaitContext, WaitanyContext, WaitsomeContext and
// WaitallContext end with the context's error and leave the requests as
// they were; waited again, they complete.
func TestWaitContext(t *testing.T) { both(t, 2, scWaitContext) }

var scBarrierContext = scenario("barrier-context", func(c *Comm) error {
	// Ranks 0 and 1 time out in a barrier rank 2 is absent from; then
	// rank 2 comes, out of step, and times out too. Every later
	// collective on the communicator fails with ErrComm; World's go on.
	d, err := c.Dup()
	if err != nil {
		return err
	}
	expired, cancel := context.WithCancel(context.Background())
	cancel()
	if err := d.BarrierContext(expired); err != nil && !errors.Is(err, ErrCanceled) {
		return fmt.Errorf("BarrierContext with an ended context: %v", err)
	} else if err == nil {
		return fmt.Errorf("BarrierContext with an ended context succeeded")
	}
	if c.Rank() == 2 {
		for range 2 {
			if _, err := c.Recv(nil, AnySource, 9); err != nil {
				return err
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	err = d.BarrierContext(ctx)
	cancel()
	if err := canceledBy(err, context.DeadlineExceeded); err != nil {
		return fmt.Errorf("rank %d: BarrierContext: %w", c.Rank(), err)
	}
	if c.Rank() != 2 {
		if err := c.Send(nil, 2, 9); err != nil {
			return err
		}
	}
	if err := d.Barrier(); !errors.Is(err, ErrComm) || ErrorClass(err) != ErrComm {
		return fmt.Errorf("Barrier after an abandoned one: %v, want ErrComm", err)
	}
	if err := d.BarrierContext(context.Background()); !errors.Is(err, ErrComm) {
		return fmt.Errorf("BarrierContext after an abandoned one: %v, want ErrComm", err)
	}
	if _, err := d.Dup(); !errors.Is(err, ErrComm) {
		return fmt.Errorf("Dup after an abandoned barrier: %v, want ErrComm", err)
	}
	if err := d.Free(); err != nil {
		return err
	}
	return c.Barrier()
})

// TestBarrierContext: a BarrierContext with one rank absent times out;
// later collectives on that communicator fail with ErrComm, and
// Finalize does not count the abandoned barrier's messages as leftovers.
func TestBarrierContext(t *testing.T) { both(t, 3, scBarrierContext) }

var scContextMisc = scenario("context-misc", func(c *Comm) error {
	// ProbeContext, SendrecvContext, the Layout forms, BufferDetachContext,
	// a nil context, and a context error through the error handler.
	short := func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(context.Background(), 10*time.Millisecond)
	}
	other := 1 - c.Rank()
	if c.Rank() == 1 {
		ctx, cancel := short()
		_, err := c.ProbeContext(ctx, 0, 1)
		cancel()
		if err := canceledBy(err, context.DeadlineExceeded); err != nil {
			return fmt.Errorf("ProbeContext: %w", err)
		}
		if err := c.Send(nil, 0, 9); err != nil {
			return err
		}
		if st, err := c.ProbeContext(context.Background(), 0, 1); err != nil || st.Count != 10 {
			return fmt.Errorf("ProbeContext: %+v %v", st, err)
		}
		if _, err := c.Recv(make([]byte, 10), 0, 1); err != nil {
			return err
		}
	} else {
		if _, err := c.Recv(nil, 1, 9); err != nil {
			return err
		}
		if err := c.Send(pattern(10, 0), 1, 1); err != nil {
			return err
		}
	}

	// SendrecvContext: both ways at once; then one with no partner.
	buf := make([]byte, 50)
	if st, err := c.SendrecvContext(context.Background(), pattern(50, c.Rank()), other, 2, buf, other, 2); err != nil || st.Count != 50 || !bytes.Equal(buf, pattern(50, other)) {
		return fmt.Errorf("SendrecvContext: %+v %v", st, err)
	}
	ctx, cancel := short()
	st, err := c.SendrecvContext(ctx, nil, ProcNull, 0, buf, other, 3)
	cancel()
	if err := canceledBy(err, context.DeadlineExceeded); err != nil || !st.Cancelled {
		return fmt.Errorf("SendrecvContext with no sender: %+v %w", st, err)
	}

	// The Layout forms.
	l, err := Strided(4, 2, 3)
	if err != nil {
		return err
	}
	if c.Rank() == 0 {
		if err := c.SendLayoutContext(context.Background(), pattern(12, 7), l, 1, 4); err != nil {
			return err
		}
	} else {
		got := make([]byte, 12)
		if _, err := c.RecvLayoutContext(context.Background(), got, l, 0, 4); err != nil {
			return err
		}
		want := make([]byte, 12)
		l.unpack(want, packOf(l, pattern(12, 7)))
		if !bytes.Equal(got, want) {
			return fmt.Errorf("RecvLayoutContext: %v, want %v", got, want)
		}
		ctx, cancel := short()
		_, err := c.RecvLayoutContext(ctx, got, l, 0, 5)
		cancel()
		if err := canceledBy(err, context.DeadlineExceeded); err != nil {
			return fmt.Errorf("RecvLayoutContext: %w", err)
		}
	}

	// A nil context is ErrArg, never a panic.
	var none context.Context
	if _, err := c.RecvContext(none, nil, other, 0); !errors.Is(err, ErrArg) {
		return fmt.Errorf("RecvContext(nil): %v, want ErrArg", err)
	}

	// The error handler sees a context's error, once.
	var seen atomic.Int32
	h, err := NewErrhandler(func(_ *Comm, err error) {
		if errors.Is(err, ErrCanceled) {
			seen.Add(1)
		}
	})
	if err != nil {
		return err
	}
	c.SetErrhandler(h)
	ctx, cancel = short()
	_, err = c.RecvContext(ctx, nil, other, 6)
	cancel()
	c.SetErrhandler(ErrorsReturn)
	if !errors.Is(err, ErrCanceled) || seen.Load() != 1 {
		return fmt.Errorf("RecvContext under a handler: %v, handler saw %d", err, seen.Load())
	}

	// BufferDetachContext of a buffer still in use by a message no one
	// receives yet.
	if c.Rank() == 0 {
		if err := c.BufferAttach(make([]byte, 200000)); err != nil {
			return err
		}
		if err := c.Bsend(pattern(100000, 8), 1, 8); err != nil {
			return err
		}
		ctx, cancel := short()
		_, err := c.BufferDetachContext(ctx)
		cancel()
		if err := canceledBy(err, context.DeadlineExceeded); err != nil {
			return fmt.Errorf("BufferDetachContext: %w", err)
		}
		if err := c.Send(nil, 1, 9); err != nil {
			return err
		}
		if b, err := c.BufferDetachContext(context.Background()); err != nil || len(b) != 200000 {
			return fmt.Errorf("BufferDetachContext: %d bytes, %v", len(b), err)
		}
	} else {
		if _, err := c.Recv(nil, 0, 9); err != nil {
			return err
		}
		if _, err := c.Recv(make([]byte, 100000), 0, 8); err != nil {
			return err
		}
	}
	return c.Barrier()
})

// packOf returns the bytes l selects of buf, packed.
func packOf(l Layout, buf []byte) []byte {
	out := make([]byte, l.Size())
	l.pack(out, buf)
	return out
}

// TestContextMisc: ProbeContext, SendrecvContext, the Layout forms,
// BufferDetachContext, a nil context, and the error handler.
func TestContextMisc(t *testing.T) { both(t, 2, scContextMisc) }

// TestInterceptContext: an interceptor sees a Context form as its plain
// form's operation with Ctx set, and the routine honours the Ctx it
// passes on (here one it replaced with a context that has ended).
func TestInterceptContext(t *testing.T) {
	var ops []string
	i := func(c *Call, next Handler) error {
		if c.Ctx != nil {
			ops = append(ops, c.Op.String())
			if c.Op == OpRecv {
				ended, cancel := context.WithCancel(context.Background())
				cancel()
				c.Ctx = ended
			}
		}
		return next(c)
	}
	withInterceptor(t, i, func() {
		err := Run(1, func(c *Comm) error {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := c.SendContext(ctx, []byte("x"), 0, 1); err != nil {
				return err
			}
			if _, err := c.RecvContext(ctx, make([]byte, 1), 0, 2); !errors.Is(err, context.Canceled) {
				return fmt.Errorf("RecvContext with the interceptor's ended context: %v", err)
			}
			r, err := c.Irecv(make([]byte, 1), 0, 1)
			if err != nil {
				return err
			}
			if _, err := r.WaitContext(ctx); err != nil {
				return err
			}
			return c.BarrierContext(ctx)
		})
		if err != nil {
			t.Fatal(err)
		}
	})
	if want := []string{"Send", "Recv", "Wait", "Barrier"}; fmt.Sprint(ops) != fmt.Sprint(want) {
		t.Fatalf("the interceptor saw %v with a context, want %v", ops, want)
	}
}

// TestContextAllocs: with a context that can end but does not, the
// Context forms allocate what the plain forms do: nothing for a send and
// a receive, the Request an Irecv makes for a wait.
func TestContextAllocs(t *testing.T) {
	if raceEnabled {
		testskip.Skip(t, testskip.RaceDetector, "the race detector allocates")
	}
	for _, serialized := range []bool{false, true} {
		t.Run(fmt.Sprint("serialized=", serialized), func(t *testing.T) {
			err := Run(1, func(c *Comm) error {
				if err := serialize(c, serialized); err != nil {
					return err
				}
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				buf := make([]byte, 8)
				pairs := []struct {
					name          string
					plain, withCx func()
				}{
					{"send-recv", func() {
						c.Send(buf, 0, 1)
						c.Recv(buf, 0, 1)
					}, func() {
						c.SendContext(ctx, buf, 0, 1)
						c.RecvContext(ctx, buf, 0, 1)
					}},
					{"irecv-send-wait", func() {
						r, _ := c.Irecv(buf, 0, 2)
						c.Send(buf, 0, 2)
						r.Wait()
					}, func() {
						r, _ := c.Irecv(buf, 0, 2)
						c.SendContext(ctx, buf, 0, 2)
						r.WaitContext(ctx)
					}},
				}
				for _, p := range pairs {
					plain := testing.AllocsPerRun(1000, p.plain)
					withCx := testing.AllocsPerRun(1000, p.withCx)
					if withCx != plain || p.name == "send-recv" && withCx != 0 {
						t.Errorf("%s: %v allocations with a context, %v without", p.name, withCx, plain)
					}
				}
				return c.Finalize()
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}

// BenchmarkContext: a rank's 8-byte message to itself, sent and
// received, with the plain forms and with the Context forms given a
// context that can end but does not: what a context costs a call.
// "recv" is Send and Recv against SendContext and RecvContext;
// "wait" is Irecv, Send and Wait against Irecv, SendContext and
// WaitContext.
func BenchmarkContext(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, serialized := range []bool{false, true} {
		level := "multiple"
		if serialized {
			level = "serialized"
		}
		for _, bc := range []struct {
			name string
			fn   func(c *Comm, buf []byte)
		}{
			{"recv/plain", func(c *Comm, buf []byte) {
				c.Send(buf, 0, 1)
				c.Recv(buf, 0, 1)
			}},
			{"recv/context", func(c *Comm, buf []byte) {
				c.SendContext(ctx, buf, 0, 1)
				c.RecvContext(ctx, buf, 0, 1)
			}},
			{"wait/plain", func(c *Comm, buf []byte) {
				r, _ := c.Irecv(buf, 0, 2)
				c.Send(buf, 0, 2)
				r.Wait()
			}},
			{"wait/context", func(c *Comm, buf []byte) {
				r, _ := c.Irecv(buf, 0, 2)
				c.SendContext(ctx, buf, 0, 2)
				r.WaitContext(ctx)
			}},
		} {
			b.Run(level+"/"+bc.name, func(b *testing.B) {
				err := Run(1, func(c *Comm) error {
					if err := serialize(c, serialized); err != nil {
						return err
					}
					buf := make([]byte, 8)
					b.ReportAllocs()
					for b.Loop() {
						bc.fn(c, buf)
					}
					return c.Finalize()
				})
				if err != nil {
					b.Fatal(err)
				}
			})
		}
	}
}

// BenchmarkPingPongContext: two goroutine ranks bounce an 8-byte message
// with Send and Recv, or with SendContext and RecvContext given a
// context that can end but does not.
func BenchmarkPingPongContext(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, withCx := range []bool{false, true} {
		name := "plain"
		if withCx {
			name = "context"
		}
		b.Run(name, func(b *testing.B) {
			send := func(c *Comm, buf []byte, dest int) error { return c.Send(buf, dest, 1) }
			recv := func(c *Comm, buf []byte, src int) error { _, err := c.Recv(buf, src, 1); return err }
			if withCx {
				send = func(c *Comm, buf []byte, dest int) error { return c.SendContext(ctx, buf, dest, 1) }
				recv = func(c *Comm, buf []byte, src int) error { _, err := c.RecvContext(ctx, buf, src, 1); return err }
			}
			n := b.N
			err := Run(2, func(c *Comm) error {
				buf := make([]byte, 8)
				other := 1 - c.Rank()
				if c.Rank() == 0 {
					b.ResetTimer()
				}
				for range n {
					if c.Rank() == 0 {
						if err := send(c, buf, other); err != nil {
							return err
						}
						if err := recv(c, buf, other); err != nil {
							return err
						}
					} else {
						if err := recv(c, buf, other); err != nil {
							return err
						}
						if err := send(c, buf, other); err != nil {
							return err
						}
					}
				}
				if c.Rank() == 0 {
					b.StopTimer()
				}
				return c.Finalize()
			})
			if err != nil {
				b.Fatal(err)
			}
		})
	}
}
