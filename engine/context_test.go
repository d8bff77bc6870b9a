package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/tachyon-hpc/tachyon/internal/testcvar"
	"github.com/tachyon-hpc/tachyon/internal/testskip"
)

// serialModes runs fn with the world's endpoints locked and serial.
func serialModes(t *testing.T, fn func(t *testing.T, serial bool)) {
	for _, serial := range []bool{false, true} {
		t.Run(map[bool]string{false: "locked", true: "serial"}[serial], func(t *testing.T) { fn(t, serial) })
	}
}

// TestRecvContextTimeout: a receive whose context's deadline passes
// returns context.DeadlineExceeded and consumes nothing: the message sent
// afterwards, eager or rendezvous, goes to the next receive, whole.
func TestRecvContextTimeout(t *testing.T) {
	serialModes(t, func(t *testing.T, serial bool) {
		for _, size := range []int{8, 100000} {
			run(t, 2, func(ep *Endpoint) error {
				setSerial(t, ep, serial)
				if ep.Rank() == 0 {
					if _, err := ep.Recv(nil, 1, 9, 0); err != nil { // rank 1's receive has timed out
						return err
					}
					return ep.Send(msg(size, 1), 1, 1, 0, Standard)
				}
				cx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
				defer cancel()
				buf := make([]byte, size)
				if st, err := ep.RecvContext(cx, buf, 0, 1, 0); !errors.Is(err, context.DeadlineExceeded) {
					return fmt.Errorf("RecvContext = %+v, %v; want context.DeadlineExceeded", st, err)
				}
				if err := ep.Send(nil, 0, 9, 0, Standard); err != nil {
					return err
				}
				if st, err := ep.Recv(buf, 0, 1, 0); err != nil || st.Count != size || !bytes.Equal(buf, msg(size, 1)) {
					return fmt.Errorf("the next Recv: %+v %v, intact %v", st, err, bytes.Equal(buf, msg(size, 1)))
				}
				return nil
			})
		}
	})
}

// TestRecvContextCancelWakes: a receive parked on its doorbell wakes
// soon after its context is cancelled.
func TestRecvContextCancelWakes(t *testing.T) {
	run(t, 2, func(ep *Endpoint) error {
		if ep.Rank() == 0 {
			_, err := ep.Recv(nil, 1, 9, 0)
			return err
		}
		cx, cancel := context.WithCancel(context.Background())
		var cancelled time.Time
		go func() {
			time.Sleep(100 * time.Millisecond) // long past the spin and pause: parked
			cancelled = time.Now()
			cancel()
		}()
		_, err := ep.RecvContext(cx, nil, 0, 1, 0)
		woke := time.Since(cancelled)
		if !errors.Is(err, context.Canceled) {
			return fmt.Errorf("RecvContext = %v, want context.Canceled", err)
		}
		if woke > 2*time.Second {
			return fmt.Errorf("woke %v after the cancel", woke)
		}
		t.Logf("woke %v after the cancel", woke)
		return ep.Send(nil, 0, 9, 0, Standard)
	})
}

// TestRecvContextMatchedWins: a receive whose message has matched when
// its context ends returns the message: one there already when a context
// that has ended is looked at, and one whose data still streams (a
// rendezvous over the network transport, whose data packets follow the
// receiver's cts, and whose sender stops polling until after the
// deadline; goroutine ranks copy a rendezvous whole as it matches).
func TestRecvContextMatchedWins(t *testing.T) {
	t.Run("arrived", func(t *testing.T) {
		run(t, 2, func(ep *Endpoint) error {
			if ep.Rank() == 0 {
				return ep.Send(msg(100, 2), 1, 1, 0, Standard)
			}
			if _, err := ep.Probe(0, 1, 0); err != nil {
				return err
			}
			cx, cancel := context.WithCancel(context.Background())
			cancel()
			buf := make([]byte, 100)
			if st, err := ep.RecvContext(cx, buf, 0, 1, 0); err != nil || st.Count != 100 || !bytes.Equal(buf, msg(100, 2)) {
				return fmt.Errorf("RecvContext of a message there = %+v, %v", st, err)
			}
			return nil
		})
	})
	t.Run("streaming", func(t *testing.T) {
		testcvar.Set(t, "engine_net_force", "true")
		const size, tries = 1 << 20, 3
		// Rank 1 waits for the announcement (Probe) and then receives with a
		// 50 ms deadline while rank 0 sleeps 150 ms without polling: the
		// receive has matched and its data comes after the deadline. A try
		// in which the data came before the deadline (the announcement
		// itself was late, on a loaded machine) tests nothing and is made
		// again; the test fails if no try tests it.
		run(t, 2, func(ep *Endpoint) error {
			late := 0
			for i := range tries {
				if ep.Rank() == 0 {
					r, err := ep.Isend(msg(size, 3+i), 1, 1, 0, Standard)
					if err != nil {
						return err
					}
					time.Sleep(150 * time.Millisecond) // not polling: the receive matched and waits for data
					if _, err = r.Wait(); err != nil {
						return err
					}
					continue
				}
				if _, err := ep.Probe(0, 1, 0); err != nil {
					return err
				}
				cx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
				buf := make([]byte, size)
				start := time.Now()
				st, err := ep.RecvContext(cx, buf, 0, 1, 0)
				el := time.Since(start)
				cancel()
				if err != nil || st.Count != size || !bytes.Equal(buf, msg(size, 3+i)) {
					return fmt.Errorf("try %d: RecvContext of a streaming message = %+v, %v", i, st, err)
				}
				if el > 50*time.Millisecond {
					late++
				}
			}
			if ep.Rank() == 1 && late == 0 {
				return fmt.Errorf("in none of %d tries did the data come after the deadline: the test tests nothing", tries)
			}
			return nil
		})
	})
}

// TestSendContextWithdrawn: a rendezvous send (or a synchronous one)
// that no receive matches before its context ends returns the context's
// error, and its receiver gets nothing of it: the next message is the
// one sent after, whole.
func TestSendContextWithdrawn(t *testing.T) {
	for _, c := range []struct {
		name string
		size int
		mode Mode
	}{{"rendezvous", 100000, Standard}, {"synchronous", 100, Synchronous}} {
		t.Run(c.name, func(t *testing.T) {
			serialModes(t, func(t *testing.T, serial bool) {
				run(t, 2, func(ep *Endpoint) error {
					setSerial(t, ep, serial)
					if ep.Rank() == 1 {
						// Polling meanwhile, as a receive does: the cancel is answered.
						if _, err := ep.Recv(nil, 0, 9, 0); err != nil {
							return err
						}
						if _, ok, err := ep.Iprobe(0, 1, 0); ok || err != nil {
							return fmt.Errorf("a withdrawn message is still there (%v)", err)
						}
						if err := ep.Send(nil, 0, 11, 0, Standard); err != nil { // probed: send the next
							return err
						}
						buf := make([]byte, c.size)
						if st, err := ep.Recv(buf, 0, 1, 0); err != nil || st.Count != c.size || !bytes.Equal(buf, msg(c.size, 5)) {
							return fmt.Errorf("the next message: %+v %v", st, err)
						}
						_, err := ep.Recv(nil, 0, 10, 0) // rank 0's send has completed: the endpoint may close
						return err
					}
					cx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
					defer cancel()
					if err := ep.SendContext(cx, msg(c.size, 4), 1, 1, 0, c.mode); !errors.Is(err, context.DeadlineExceeded) {
						return fmt.Errorf("SendContext = %v, want context.DeadlineExceeded", err)
					}
					if err := ep.Send(nil, 1, 9, 0, Standard); err != nil {
						return err
					}
					if _, err := ep.Recv(nil, 1, 11, 0); err != nil {
						return err
					}
					if err := ep.Send(msg(c.size, 5), 1, 1, 0, c.mode); err != nil {
						return err
					}
					return ep.Send(nil, 1, 10, 0, Standard)
				})
			})
		})
	}
}

// TestSendContextCompletes: a send whose receive matches in time
// completes, eager or rendezvous, and a Buffered one is Send.
func TestSendContextCompletes(t *testing.T) {
	run(t, 2, func(ep *Endpoint) error {
		cx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if ep.Rank() == 0 {
			for i, n := range []int{8, 100000} {
				if err := ep.SendContext(cx, msg(n, i), 1, i, 0, Standard); err != nil {
					return err
				}
				if err := ep.SendContext(cx, msg(n, i), 1, i, 0, Synchronous); err != nil {
					return err
				}
			}
			if err := ep.SendContext(cx, msg(8, 0), 1, 0, 0, Buffered); !errors.Is(err, ErrBuffer) {
				return fmt.Errorf("a buffered SendContext without a buffer: %v", err)
			}
			return nil
		}
		for i, n := range []int{8, 100000} {
			for range 2 {
				buf := make([]byte, n)
				if st, err := ep.RecvContext(cx, buf, 0, i, 0); err != nil || st.Count != n || !bytes.Equal(buf, msg(n, i)) {
					return fmt.Errorf("RecvContext %d: %+v %v", n, st, err)
				}
			}
		}
		return nil
	})
}

// TestRequestWaitContext: a request whose context ends stays pending and
// may be waited for again; WaitOrCancel of a request already complete
// returns its outcome whatever the context.
func TestRequestWaitContext(t *testing.T) {
	run(t, 2, func(ep *Endpoint) error {
		if ep.Rank() == 0 {
			if _, err := ep.Recv(nil, 1, 9, 0); err != nil {
				return err
			}
			return ep.Send(msg(64, 6), 1, 1, 0, Standard)
		}
		r, err := ep.Irecv(make([]byte, 64), 0, 1, 0)
		if err != nil {
			return err
		}
		cx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
		defer cancel()
		if _, err := r.WaitContext(cx); !errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("WaitContext = %v, want context.DeadlineExceeded", err)
		}
		if r.Done() {
			return fmt.Errorf("the request completed")
		}
		if err := ep.Send(nil, 0, 9, 0, Standard); err != nil {
			return err
		}
		for !r.Done() {
			ep.Progress().Progress()
		}
		if st, err := r.WaitOrCancel(cx); err != nil || st.Count != 64 || st.Cancelled {
			return fmt.Errorf("WaitOrCancel of a complete receive = %+v, %v", st, err)
		}
		return nil
	})
}

// TestProbeContext: a probe whose context ends returns its error; one
// that finds a message returns its status.
func TestProbeContext(t *testing.T) {
	run(t, 2, func(ep *Endpoint) error {
		if ep.Rank() == 0 {
			if _, err := ep.Recv(nil, 1, 9, 0); err != nil {
				return err
			}
			return ep.Send(msg(10, 0), 1, 1, 0, Standard)
		}
		cx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
		defer cancel()
		if _, err := ep.ProbeContext(cx, 0, 1, 0); !errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("ProbeContext = %v, want context.DeadlineExceeded", err)
		}
		if err := ep.Send(nil, 0, 9, 0, Standard); err != nil {
			return err
		}
		if st, err := ep.ProbeContext(context.Background(), 0, 1, 0); err != nil || st.Count != 10 {
			return fmt.Errorf("ProbeContext = %+v, %v", st, err)
		}
		_, err := ep.Recv(make([]byte, 10), 0, 1, 0)
		return err
	})
}

// TestBufferDetachContext: a detach whose context ends before the
// buffered messages have left returns its error and leaves the buffer
// attached; a later one detaches it.
func TestBufferDetachContext(t *testing.T) {
	run(t, 2, func(ep *Endpoint) error {
		if ep.Rank() == 1 {
			if _, err := ep.Recv(nil, 0, 9, 0); err != nil {
				return err
			}
			_, err := ep.Recv(make([]byte, 100000), 0, 1, 0)
			return err
		}
		buf := make([]byte, 200000)
		if err := ep.BufferAttach(buf); err != nil {
			return err
		}
		if err := ep.Send(msg(100000, 0), 1, 1, 0, Buffered); err != nil {
			return err
		}
		cx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
		defer cancel()
		if _, err := ep.BufferDetachContext(cx); !errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("BufferDetachContext = %v, want context.DeadlineExceeded", err)
		}
		if err := ep.Send(nil, 1, 9, 0, Standard); err != nil {
			return err
		}
		b, err := ep.BufferDetachContext(context.Background())
		if err != nil || len(b) != len(buf) {
			return fmt.Errorf("BufferDetachContext = %d bytes, %v", len(b), err)
		}
		return nil
	})
}

// TestContextAllocs: with a context that can end but does not, the
// Context forms allocate nothing on a rank's message to itself.
func TestContextAllocs(t *testing.T) {
	if raceEnabled {
		testskip.Skip(t, testskip.RaceDetector, "the race detector allocates")
	}
	serialModes(t, func(t *testing.T, serial bool) {
		w, err := NewWorld(1)
		if err != nil {
			t.Fatal(err)
		}
		ep := w.Endpoint(0)
		defer ep.Close()
		setSerial(t, ep, serial)
		cx, cancel := context.WithCancel(context.Background())
		defer cancel()
		buf := make([]byte, 8)
		cases := map[string]func(){
			"send-recv": func() {
				ep.SendContext(cx, buf, 0, 1, 0, Standard)
				ep.RecvContext(cx, buf, 0, 1, 0)
			},
			"irecv-send-wait": func() {
				r, _ := ep.Irecv(buf, 0, 2, 0)
				ep.SendContext(cx, buf, 0, 2, 0, Standard)
				r.WaitContext(cx)
			},
			"irecv-ssend-waitorcancel": func() {
				r, _ := ep.Irecv(buf, 0, 3, 0)
				ep.SendContext(cx, buf, 0, 3, 0, Synchronous)
				r.WaitOrCancel(cx)
			},
		}
		for name, f := range cases {
			for i := 0; i < 100; i++ {
				f()
			}
			if n := testing.AllocsPerRun(1000, f); n != 0 {
				t.Errorf("%s: %v allocations per message", name, n)
			}
		}
	})
}
