package mpi

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"unsafe"

	"github.com/tachyon-hpc/tachyon/internal/testskip"
)

// TestRequestAllocs guards the message path of the facade: a window of
// Isend and Irecv waited with WaitallInto allocates nothing once warm
// (WaitallInto gives the requests back for reuse, and the engine below
// allocates nothing); waited one by one, each operation allocates its
// small Request.
func TestRequestAllocs(t *testing.T) {
	// 48: a send that completed at once keeps its message's name (16
	// bytes, for a cancel) in place of an engine request.
	if n := unsafe.Sizeof(Request{}); n > 48 {
		t.Errorf("Request is %d bytes; the message path allocates one per operation, keep it at 48", n)
	}
	for _, serialized := range []bool{false, true} {
		t.Run(fmt.Sprint("serialized=", serialized), func(t *testing.T) { requestAllocs(t, serialized) })
	}
}

// requestAllocs runs TestRequestAllocs on a rank of Run (ThreadMultiple)
// or made to run as InitThread(ThreadSerialized) does, where the
// requests of receives stay with their engine requests' slots.
func requestAllocs(t *testing.T, serialized bool) {
	const window = 16
	err := Run(1, func(c *Comm) error {
		if err := serialize(c, serialized); err != nil {
			return err
		}
		buf := make([]byte, 8)
		reqs := make([]*Request, 2*window)
		allocs := testing.AllocsPerRun(200, func() {
			for i := range window {
				reqs[i], _ = c.Irecv(buf, 0, i)
			}
			for i := range window {
				reqs[window+i], _ = c.Isend(buf, 0, i)
			}
			if err := WaitallInto(reqs, nil); err != nil {
				t.Error(err)
			}
		})
		if allocs != 0 {
			t.Errorf("a window of %d sends and receives waited with WaitallInto allocates %v times", window, allocs)
		}
		allocs = testing.AllocsPerRun(200, func() {
			r1, _ := c.Irecv(buf, 0, 1)
			r2, _ := c.Isend(buf, 0, 1)
			r1.Wait()
			r2.Wait()
		})
		if allocs > 2 {
			t.Errorf("an Isend and an Irecv waited one by one allocate %v times, want at most 2", allocs)
		}
		return c.Finalize()
	})
	if err != nil {
		t.Fatal(err)
	}
}

// serialize makes the rank c of Run run as InitThread(ThreadSerialized)
// makes a process run, when on: its endpoint serial (the engine's direct
// paths, the requests' own fast path) and its thread level
// ThreadSerialized. Off, it leaves c as Run made it (ThreadMultiple).
func serialize(c *Comm, on bool) error {
	if !on {
		return nil
	}
	if err := c.p.ep.SetSerial(true); err != nil {
		return err
	}
	c.p.thread = ThreadSerialized
	return nil
}

func TestWaitallIntoStatuses(t *testing.T) {
	err := Run(2, func(c *Comm) error {
		peer := 1 - c.Rank()
		r1, err := c.Isend([]byte("hello"), peer, 7)
		if err != nil {
			return err
		}
		r2, err := c.Irecv(make([]byte, 5), peer, 7)
		if err != nil {
			return err
		}
		reqs := []*Request{r1, nil, r2}
		if err := WaitallInto(reqs, make([]Status, 2)); err == nil {
			t.Error("WaitallInto with too few statuses: no error")
		}
		sts := make([]Status, 3)
		if err := WaitallInto(reqs, sts); err != nil {
			return err
		}
		if reqs[0] != nil || reqs[2] != nil {
			t.Error("completed requests not set to nil")
		}
		if sts[2].Source != peer || sts[2].Tag != 7 || sts[2].Count != 5 {
			t.Errorf("receive status %+v", sts[2])
		}
		if sts[1] != emptyStatus {
			t.Errorf("nil request's status %+v", sts[1])
		}
		return c.Finalize()
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestWaitallIntoErrors: without statuses, WaitallInto still reports a
// receive's error (the first, as its class) after completing every
// request, and the requests it collected, the failed one included, serve
// the next window.
func TestWaitallIntoErrors(t *testing.T) {
	for _, serial := range []bool{false, true} {
		t.Run(fmt.Sprintf("serial=%v", serial), func(t *testing.T) { testWaitallIntoErrors(t, serial) })
	}
}

func testWaitallIntoErrors(t *testing.T, serial bool) {
	err := Run(2, func(c *Comm) error {
		// Below ThreadMultiple: the requests' own fast path.
		if err := serialize(c, serial); err != nil {
			return err
		}
		for round := range 3 {
			if c.Rank() == 1 {
				reqs := make([]*Request, 3)
				for i := range reqs {
					var err error
					if reqs[i], err = c.Isend(pattern(8, round+i), 0, i); err != nil {
						return err
					}
				}
				if err := WaitallInto(reqs, nil); err != nil {
					return err
				}
				if _, err := c.Recv(nil, 0, 99); err != nil {
					return err
				}
				continue
			}
			bufs := [][]byte{make([]byte, 8), make([]byte, 4), make([]byte, 8)}
			reqs := make([]*Request, 3)
			for i := range reqs {
				var err error
				if reqs[i], err = c.Irecv(bufs[i], 1, i); err != nil {
					return err
				}
			}
			err := WaitallInto(reqs, nil)
			if !errors.Is(err, ErrTruncate) {
				return fmt.Errorf("round %d: WaitallInto with a truncated receive returned %v", round, err)
			}
			for i, r := range reqs {
				if r != nil {
					return fmt.Errorf("round %d: request %d not set to nil", round, i)
				}
			}
			if !bytes.Equal(bufs[0], pattern(8, round)) || !bytes.Equal(bufs[1], pattern(8, round+1)[:4]) || !bytes.Equal(bufs[2], pattern(8, round+2)) {
				return fmt.Errorf("round %d: received %x %x %x", round, bufs[0], bufs[1], bufs[2])
			}
			if err := c.Send(nil, 1, 99); err != nil {
				return err
			}
		}
		return c.Finalize()
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestWaitallIntoRecycles: requests WaitallInto completed come back from
// later Isend and Irecv calls clean, and requests waited otherwise, or
// still held, are never handed out twice.
func TestWaitallIntoRecycles(t *testing.T) {
	err := Run(1, func(c *Comm) error {
		buf := make([]byte, 8)
		r1, _ := c.Isend(buf, 0, 1)
		r2, _ := c.Irecv(buf, 0, 1)
		if err := WaitallInto([]*Request{r1, r2}, nil); err != nil {
			return err
		}
		seen := map[*Request]bool{}
		for i := range 50 {
			s, _ := c.Isend(buf, 0, i)
			if seen[s] {
				t.Fatal("a request handed out twice while in use")
			}
			seen[s] = true
			// An 8-byte send goes out at once: no engine request, the
			// message's name instead.
			if !s.active() || s.er != nil || !s.sent.Valid() || s.x != nil || s.inactive || s.freed {
				t.Fatalf("a recycled request is not clean: %+v", *s)
			}
		}
		for i := range 50 {
			if _, err := c.Recv(buf, 0, i); err != nil {
				return err
			}
		}
		var held []*Request
		for r := range seen {
			held = append(held, r)
		}
		if err := WaitallInto(held, nil); err != nil {
			return err
		}
		return c.Finalize()
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestSlotRequests: below ThreadMultiple a request that WaitallInto
// completed stays with its engine request's slot and comes back, clean,
// from the slot's next operation; one waited otherwise is the caller's
// and the slot's next operation gets another, leaving it as it was.
func TestSlotRequests(t *testing.T) {
	err := Run(1, func(c *Comm) error {
		if err := serialize(c, true); err != nil {
			return err
		}
		buf := make([]byte, 8)
		r1, err := recvFromSelf(c, buf, 1, nil)
		if err != nil {
			return err
		}
		r2, err := c.Irecv(buf, 0, 2)
		if err != nil {
			return err
		}
		if r2 != r1 {
			t.Error("the slot's next receive did not take back the request WaitallInto completed")
		}
		if !r2.active() || r2.er == nil || r2.spare || r2.x != nil || r2.op != opIrecv {
			t.Errorf("a request taken back is not clean: %+v", *r2)
		}
		if err := c.Send(buf[:3], 0, 2); err != nil {
			return err
		}
		if st, err := r2.Wait(); err != nil || st.Count != 3 || st.Tag != 2 {
			t.Errorf("Wait: %+v %v", st, err)
		}
		r3, err := c.Irecv(buf, 0, 3)
		if err != nil {
			return err
		}
		if r3 == r2 {
			t.Fatal("a request the caller holds was handed out again")
		}
		if st, err := r2.Wait(); err != nil || st != emptyStatus {
			t.Errorf("waiting again on a request waited once: %+v %v", st, err)
		}
		if err := c.Send(buf, 0, 3); err != nil {
			return err
		}
		if err := WaitallInto([]*Request{r3}, nil); err != nil {
			return err
		}
		return c.Finalize()
	})
	if err != nil {
		t.Fatal(err)
	}
}

// recvFromSelf receives a message of buf's length from c's rank 0 (the
// caller itself) into buf: Irecv, then Send, then WaitallInto with
// statuses sts. It returns the request, which WaitallInto completed.
func recvFromSelf(c *Comm, buf []byte, tag int, sts []Status) (*Request, error) {
	r, err := c.Irecv(buf, 0, tag)
	if err != nil {
		return nil, err
	}
	if err := c.Send(buf, 0, tag); err != nil {
		return nil, err
	}
	return r, WaitallInto([]*Request{r}, sts)
}

// BenchmarkSelfWindow: windows of 64 Irecv and 64 Isend of 8 bytes from a
// rank to itself, waited with WaitallInto: the facade's and the engine's
// software cost per message of the message-rate loop, with no cross-core
// transfer in it; "intercepted" and "intercepted-serial" with one
// interceptor that passes every call on.
func BenchmarkSelfWindow(b *testing.B) {
	b.Run("multiple", func(b *testing.B) { selfWindow(b, false) })
	b.Run("serialized", func(b *testing.B) { selfWindow(b, true) })
	for _, serialized := range []bool{false, true} {
		name := "intercepted"
		if serialized {
			name += "-serial" // not "-serialized": -bench SelfWindow/serialized stays the one run
		}
		b.Run(name, func(b *testing.B) {
			if intercepted() {
				testskip.Skip(b, testskip.Intercepted, "an interceptor is registered for the whole run")
			}
			remove, err := Intercept(passThrough)
			if err != nil {
				b.Fatal(err)
			}
			defer remove()
			selfWindow(b, serialized)
		})
	}
}

// selfWindow runs BenchmarkSelfWindow on a rank of Run, which provides
// ThreadMultiple, or made to run as InitThread(ThreadSerialized) does.
func selfWindow(b *testing.B, serialized bool) {
	const window = 64
	err := Run(1, func(c *Comm) error {
		if err := serialize(c, serialized); err != nil {
			return err
		}
		buf := make([]byte, 8)
		reqs := make([]*Request, 2*window)
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i += window {
			for j := range window {
				reqs[j], _ = c.Irecv(buf, 0, 1)
			}
			for j := range window {
				reqs[window+j], _ = c.Isend(buf, 0, 1)
			}
			if err := WaitallInto(reqs, nil); err != nil {
				return err
			}
		}
		b.StopTimer()
		return c.Finalize()
	})
	if err != nil {
		b.Fatal(err)
	}
}

// TestRequestReuseConcurrent: at ThreadMultiple, goroutines that start
// and complete windows at once share the rank's free requests; none gets
// a request another still uses (a message would land in the wrong
// buffer, or a status would be another's).
func TestRequestReuseConcurrent(t *testing.T) {
	const goroutines, windows, window = 4, 200, 16
	err := Run(1, func(c *Comm) error {
		errs := make(chan error, goroutines)
		for g := range goroutines {
			go func() {
				errs <- func() error {
					bufs := make([][]byte, window)
					reqs := make([]*Request, 2*window)
					statuses := make([]Status, 2*window)
					for w := range windows {
						for i := range window {
							bufs[i] = make([]byte, 8)
							tag := g*window + i
							var err error
							if reqs[i], err = c.Irecv(bufs[i], 0, tag); err != nil {
								return err
							}
							msg := []byte{byte(g), byte(i), byte(w), 0, 0, 0, 0, 0}
							if reqs[window+i], err = c.Isend(msg, 0, tag); err != nil {
								return err
							}
						}
						if err := WaitallInto(reqs, statuses); err != nil {
							return err
						}
						for i := range window {
							if st := statuses[i]; st.Tag != g*window+i || st.Count != 8 {
								return fmt.Errorf("goroutine %d window %d: receive %d has status %+v", g, w, i, st)
							}
							if b := bufs[i]; b[0] != byte(g) || b[1] != byte(i) || b[2] != byte(w) {
								return fmt.Errorf("goroutine %d window %d: receive %d got %v", g, w, i, b)
							}
						}
					}
					return nil
				}()
			}()
		}
		for range goroutines {
			if err := <-errs; err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestZeroRequest: a Request the program made itself, not one MPI
// returned, waits and tests without a panic.
func TestZeroRequest(t *testing.T) {
	var r Request
	if _, err := r.Wait(); err != nil {
		t.Fatal(err)
	}
	if _, done, err := new(Request).Test(); !done || err != nil {
		t.Fatalf("Test: %v %v", done, err)
	}
	if err := WaitallInto([]*Request{new(Request), nil}, nil); err != nil {
		t.Fatal(err)
	}
}

// TestProcOwnLines checks that a rank's request stack and its lock, which
// every Isend and Irecv write, share no cache line with the memory beside
// the rank's proc: under Run the neighbours are other ranks' procs,
// written from other cores.
func TestProcOwnLines(t *testing.T) {
	var p proc
	first, end := unsafe.Offsetof(p.ep), unsafe.Offsetof(p.reqLock)+unsafe.Sizeof(p.reqLock)
	if first < 64 || unsafe.Sizeof(p)-end < 64 {
		t.Errorf("proc: %d bytes, fields at [%d, %d): want a line of padding before and after", unsafe.Sizeof(p), first, end)
	}
}

// TestWaitallIntoMixed: without statuses, a window that mixes the usual
// requests with others (a receive from ProcNull, a persistent receive, an
// Isend to ProcNull, nil entries) and a failing receive completes every
// one: each completed entry but the persistent one is set to nil, the
// persistent one stays and can start again, every buffer holds its
// message, and the error returned is the first, the truncation.
func TestWaitallIntoMixed(t *testing.T) {
	for _, serial := range []bool{false, true} {
		t.Run(fmt.Sprintf("serial=%v", serial), func(t *testing.T) {
			err := Run(2, func(c *Comm) error {
				if err := serialize(c, serial); err != nil {
					return err
				}
				for round := range 3 {
					if c.Rank() == 1 {
						for i := range 4 {
							if err := c.Send(pattern(8, round+i), 0, i); err != nil {
								return err
							}
						}
						if _, err := c.Recv(nil, 0, 99); err != nil {
							return err
						}
						continue
					}
					bufs := [][]byte{make([]byte, 8), make([]byte, 4), make([]byte, 8), make([]byte, 8)}
					pers, err := c.RecvInit(bufs[2], 1, 2)
					if err != nil {
						return err
					}
					if err := pers.Start(); err != nil {
						return err
					}
					r0, err := c.Irecv(bufs[0], 1, 0)
					if err != nil {
						return err
					}
					null, err := c.Irecv(make([]byte, 8), ProcNull, 0)
					if err != nil {
						return err
					}
					r1, err := c.Irecv(bufs[1], 1, 1) // truncated
					if err != nil {
						return err
					}
					nullSend, err := c.Isend(nil, ProcNull, 0)
					if err != nil {
						return err
					}
					r3, err := c.Irecv(bufs[3], 1, 3)
					if err != nil {
						return err
					}
					reqs := []*Request{r0, nil, null, r1, pers, nullSend, r3, nil}
					if err := WaitallInto(reqs, nil); !errors.Is(err, ErrTruncate) {
						return fmt.Errorf("round %d: WaitallInto returned %v, want the truncation", round, err)
					}
					for i, r := range reqs {
						if (r != nil) != (i == 4) {
							return fmt.Errorf("round %d: entry %d is %v after WaitallInto", round, i, r)
						}
					}
					for i, b := range bufs {
						if !bytes.Equal(b, pattern(8, round+i)[:len(b)]) {
							return fmt.Errorf("round %d: buffer %d holds %x", round, i, b)
						}
					}
					if err := pers.Free(); err != nil {
						return err
					}
					if err := c.Send(nil, 1, 99); err != nil {
						return err
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

// TestWaitallIntoAfterOtherUse: a request of Isend or Irecv that took the
// usual path and was then waited, tested, cancelled or freed is no longer
// one WaitallInto collects in line (Request.hot): it takes the general
// path, which reports the freed one and waits for the cancel, and no
// request goes back to the free stack twice.
func TestWaitallIntoAfterOtherUse(t *testing.T) {
	if intercepted() {
		testskip.Skip(t, testskip.Intercepted, "an interceptor keeps every request off the usual path")
	}
	uses := []struct {
		name    string
		use     func(r *Request) error
		wantErr error
	}{
		{"Wait", func(r *Request) error { _, err := r.Wait(); return err }, nil},
		{"Test", func(r *Request) error {
			for {
				_, done, err := r.Test()
				if done || err != nil {
					return err
				}
			}
		}, nil},
		{"Cancel", (*Request).Cancel, nil},
		{"Free", (*Request).Free, ErrRequest},
	}
	kinds := []struct {
		name  string
		start func(c *Comm, buf []byte, tag int) (*Request, error)
	}{
		{"sent at once", func(c *Comm, buf []byte, tag int) (*Request, error) { return c.Isend(buf, 0, tag) }},
		{"receive", func(c *Comm, buf []byte, tag int) (*Request, error) {
			r, err := c.Irecv(buf, 0, tag)
			if err != nil {
				return nil, err
			}
			return r, c.Send(pattern(len(buf), tag), 0, tag)
		}},
	}
	err := Run(1, func(c *Comm) error {
		if err := serialize(c, true); err != nil {
			return err
		}
		tag := 0
		for _, k := range kinds {
			for _, u := range uses {
				tag++
				buf := make([]byte, 8)
				r, err := k.start(c, buf, tag)
				if err != nil {
					return fmt.Errorf("%s: %v", k.name, err)
				}
				if r.hot == notHot {
					return fmt.Errorf("%s: the request did not take the usual path", k.name)
				}
				if err := u.use(r); err != nil {
					return fmt.Errorf("%s, %s: %v", k.name, u.name, err)
				}
				err = WaitallInto([]*Request{r}, nil)
				if u.wantErr == nil && err != nil || u.wantErr != nil && !errors.Is(err, u.wantErr) {
					return fmt.Errorf("%s, %s: WaitallInto returned %v, want %v", k.name, u.name, err, u.wantErr)
				}
				if r.er != nil {
					return fmt.Errorf("%s, %s: WaitallInto left the engine request uncollected", k.name, u.name)
				}
				// The message, withdrawn or not: drain it if it is there
				// (an Iprobe finds it by its second look), so that
				// Finalize finds nothing left.
				for range 2 {
					_, ok, err := c.Iprobe(0, tag)
					if err != nil {
						return err
					}
					if ok {
						if _, err := c.Recv(buf, 0, tag); err != nil {
							return err
						}
						break
					}
				}
			}
		}
		// A receive's request, kept by its slot once WaitallInto
		// completed it (in line, or with statuses, the general loop),
		// is clean but for what Irecv sets (spareOf).
		for _, sts := range [][]Status{nil, make([]Status, 1)} {
			r, err := recvFromSelf(c, make([]byte, 8), 98, sts)
			if err != nil {
				return err
			}
			if spare := (Request{c: r.c, op: r.op, inactive: true, spare: true}); *r != spare {
				return fmt.Errorf("a spare request (statuses %v) keeps %+v", sts != nil, *r)
			}
		}
		// And one WaitallInto collects in line (collectPlain).
		buf := make([]byte, 8)
		r, err := c.Isend(buf, 0, 99)
		if err != nil {
			return err
		}
		if err := WaitallInto([]*Request{r}, nil); err != nil {
			return err
		}
		if _, err := c.Recv(buf, 0, 99); err != nil {
			return err
		}
		seen := map[*Request]bool{}
		for _, r := range c.p.reqFree[:c.p.nFree] {
			if seen[r] {
				return errors.New("a request is on the free stack twice")
			}
			seen[r] = true
			// Clean but for c, op and inactive, which Isend sets.
			if clean := (Request{c: r.c, op: r.op, inactive: r.inactive}); *r != clean {
				return fmt.Errorf("a request on the free stack keeps %+v", *r)
			}
		}
		return c.Finalize()
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestWaitallIntoLocalArray: a window of requests in a local array stays
// in its frame: WaitallInto (and Isend, Irecv) keep no caller's slice, so
// the array does not escape to the heap and a window allocates nothing.
func TestWaitallIntoLocalArray(t *testing.T) {
	err := Run(1, func(c *Comm) error {
		buf := make([]byte, 8)
		window := func() {
			var reqs [4]*Request
			for i := range 2 {
				reqs[i], _ = c.Irecv(buf, 0, i)
			}
			for i := range 2 {
				reqs[2+i], _ = c.Isend(buf, 0, i)
			}
			WaitallInto(reqs[:], nil)
		}
		window()
		if n := testing.AllocsPerRun(200, window); n != 0 {
			return fmt.Errorf("%.1f allocations per window of requests in a local array", n)
		}
		return c.Finalize()
	})
	if err != nil {
		t.Fatal(err)
	}
}
