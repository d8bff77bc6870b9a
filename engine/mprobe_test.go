package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/tachyon-hpc/tachyon/internal/testcvar"
	"github.com/tachyon-hpc/tachyon/internal/testskip"
)

// mprobeSizes are messages of each way a matched probe finds them: a
// short packet, an eager message in one packet, an eager message in
// fragments (engine_eager_limit raised past a packet), and a rendezvous.
var mprobeSizes = []int{0, 8, 4000, 100 << 10, 1 << 20}

// raiseEagerLimit makes messages of up to 128 KiB eager, so that those
// larger than a packet go in fragments.
func raiseEagerLimit(t *testing.T) {
	testcvar.Set(t, "engine_eager_limit", strconv.Itoa(128<<10))
}

// TestMprobeSizes: Mprobe and Improbe find each kind of message, take it
// off the queues (no probe or receive sees it after), and Mrecv and
// Imrecv receive it whole, with its status.
func TestMprobeSizes(t *testing.T) {
	raiseEagerLimit(t)
	for _, blocking := range []bool{true, false} {
		run(t, 2, func(ep *Endpoint) error {
			if ep.Rank() == 0 {
				for k, n := range mprobeSizes {
					if err := ep.Send(msg(n, k), 1, k, 3, Standard); err != nil {
						return err
					}
				}
				return nil
			}
			for k, n := range mprobeSizes {
				var m Message
				var st Status
				var err error
				if blocking {
					m, st, err = ep.Mprobe(AnySource, AnyTag, 3)
				} else {
					for ok := false; !ok && err == nil; {
						m, st, ok, err = ep.Improbe(0, k, 3)
					}
				}
				if err != nil || st.Source != 0 || st.Tag != k || st.Count != n {
					return fmt.Errorf("probe of message %d (%d bytes): %+v %v", k, n, st, err)
				}
				if _, ok, _ := ep.Iprobe(0, k, 3); ok {
					return fmt.Errorf("message %d still found by Iprobe after a matched probe", k)
				}
				buf := make([]byte, n)
				if blocking {
					st, err = ep.Mrecv(m, buf)
				} else {
					var r *Request
					if r, err = ep.Imrecv(m, buf); err == nil {
						st, err = r.Wait()
					}
				}
				if err != nil || st.Source != 0 || st.Tag != k || st.Count != n || !bytes.Equal(buf, msg(n, k)) {
					return fmt.Errorf("receive of message %d (%d bytes): %+v %v", k, n, st, err)
				}
				if _, err := ep.Mrecv(m, buf); !errors.Is(err, ErrRequest) {
					return fmt.Errorf("second receive of message %d: %v, want ErrRequest", k, err)
				}
			}
			return nil
		})
	}
}

// TestMprobeTruncate: a matched message longer than the buffer fills it
// and returns ErrTruncate, as Recv does.
func TestMprobeTruncate(t *testing.T) {
	raiseEagerLimit(t)
	for _, n := range []int{100, 5000, 100 << 10, 200000} {
		run(t, 2, func(ep *Endpoint) error {
			if ep.Rank() == 0 {
				return ep.Send(msg(n, 1), 1, 0, 0, Standard)
			}
			m, _, err := ep.Mprobe(0, 0, 0)
			if err != nil {
				return err
			}
			buf := make([]byte, 50)
			st, err := ep.Mrecv(m, buf)
			if !errors.Is(err, ErrTruncate) || st.Count != 50 || !bytes.Equal(buf, msg(n, 1)[:50]) {
				return fmt.Errorf("size %d: %+v %v", n, st, err)
			}
			return nil
		})
	}
}

// TestMprobeBadMessage: the zero Message, one already received, and one
// whose slot a later message reuses are refused with ErrRequest; a message
// a matched probe took stays the probe's, whatever receives come after.
func TestMprobeBadMessage(t *testing.T) {
	run(t, 2, func(ep *Endpoint) error {
		if ep.Rank() == 0 {
			for i := range 3 {
				if err := ep.Send(msg(10, i), 1, 0, 0, Standard); err != nil {
					return err
				}
			}
			return nil
		}
		if _, err := ep.Mrecv(Message{}, nil); !errors.Is(err, ErrRequest) {
			return fmt.Errorf("zero Message: %v", err)
		}
		first, _, err := ep.Mprobe(0, 0, 0)
		if err != nil {
			return err
		}
		// A receive of the same key gets the next message, not the one
		// the probe took.
		buf := make([]byte, 10)
		if _, err := ep.Recv(buf, 0, 0, 0); err != nil || !bytes.Equal(buf, msg(10, 1)) {
			return fmt.Errorf("receive after a matched probe got %v (%v), want the second message", buf, err)
		}
		if _, err := ep.Mrecv(first, buf); err != nil || !bytes.Equal(buf, msg(10, 0)) {
			return fmt.Errorf("matched message: %v %v", buf, err)
		}
		// The third message may reuse the first's slot: the stale
		// Message must not receive it.
		third, _, err := ep.Mprobe(0, 0, 0)
		if err != nil {
			return err
		}
		if _, err := ep.Mrecv(first, buf); !errors.Is(err, ErrRequest) {
			return fmt.Errorf("stale Message: %v", err)
		}
		if _, err := ep.Mrecv(third, buf); err != nil || !bytes.Equal(buf, msg(10, 2)) {
			return fmt.Errorf("third message: %v %v", buf, err)
		}
		return nil
	})
}

// TestMprobeArriving: a matched probe takes an eager message of which
// only the first fragments have arrived (the sender's ring is full and it
// does not poll), and the receive started on it completes when the rest
// comes.
func TestMprobeArriving(t *testing.T) {
	skipOnNetwork(t, "ring to fill")
	testcvar.Set(t, "engine_ring_bytes", strconv.Itoa(4<<10))
	const n = 16 << 10 // eager, in some 33 packets of a 4 KiB ring's 504 bytes
	w, err := NewWorld(2)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Endpoint(0).Close()
	defer w.Endpoint(1).Close()
	a, b := w.Endpoint(0), w.Endpoint(1)
	s, err := a.Isend(msg(n, 5), 1, 9, 0, Standard)
	if err != nil {
		t.Fatal(err)
	}
	m := improbeSoon(t, b, 0, 9)
	if m.u.got >= m.u.length {
		t.Fatalf("the whole message arrived (%d of %d bytes): the ring was not full", m.u.got, m.u.length)
	}
	buf := make([]byte, n)
	r, err := b.Imrecv(m, buf)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := s.Wait(); done <- err }() // rank 0 pushes the rest
	st, err := r.Wait()
	if err != nil || st.Count != n || !bytes.Equal(buf, msg(n, 5)) {
		t.Fatalf("receive: %+v %v", st, err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// improbeSoon returns the message Improbe finds from src with tag in
// context 0, failing the test after a while.
func improbeSoon(t *testing.T, ep *Endpoint, src, tag int) Message {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); {
		m, _, ok, err := ep.Improbe(src, tag, 0)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			return m
		}
	}
	t.Fatal("no message came")
	return Message{}
}

// awaitDeath waits until ep finds rank src gone: a Probe of a message
// src never sends (a probe, unlike Iprobe, keeps checking the peers).
func awaitDeath(t *testing.T, ep *Endpoint, src int) {
	t.Helper()
	if _, err := ep.Probe(src, 12345, 0); !errors.Is(err, ErrPeerDead) {
		t.Fatalf("probe of a dead rank: %v", err)
	}
}

// TestMprobeSenderDies: a matched message whose sender dies before its
// data has come fails its receive with ErrPeerDead, whether the receive
// starts before the death is seen or after; one whose data is all here
// is received all the same.
func TestMprobeSenderDies(t *testing.T) {
	for _, c := range []struct {
		name   string
		n      int
		ring   int  // engine_ring_bytes, 0: the default
		before bool // the receive starts before the death is seen
		lost   bool // the data never comes
	}{
		{"eager-whole", 4000, 0, false, false},
		{"eager-arriving", 16 << 10, 4 << 10, false, true},
		{"eager-arriving-receiving", 16 << 10, 4 << 10, true, true},
		{"rendezvous", 1 << 20, 0, false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.ring != 0 {
				skipOnNetwork(t, "ring to fill")
				testcvar.Set(t, "engine_ring_bytes", strconv.Itoa(c.ring))
			}
			a, b := twoRanks(t)
			var err error
			if c.n <= 4000 {
				err = a.Send(msg(c.n, 1), 1, 2, 0, Standard)
			} else {
				_, err = a.Isend(msg(c.n, 1), 1, 2, 0, Standard)
			}
			if err != nil {
				t.Fatal(err)
			}
			m := improbeSoon(t, b, 0, 2)
			buf := make([]byte, c.n)
			var r *Request
			if c.before {
				if r, err = b.Imrecv(m, buf); err != nil {
					t.Fatal(err)
				}
			}
			a.Close()
			awaitDeath(t, b, 0)
			if !c.before {
				if r, err = b.Imrecv(m, buf); err != nil {
					t.Fatal(err)
				}
			}
			st, err := r.Wait()
			switch {
			case c.lost && !errors.Is(err, ErrPeerDead):
				t.Fatalf("receive from a dead sender: %+v %v, want ErrPeerDead", st, err)
			case !c.lost && (err != nil || !bytes.Equal(buf, msg(c.n, 1))):
				t.Fatalf("receive of a whole message from a dead sender: %+v %v", st, err)
			}
			if left, n := b.Leftovers(10); n != 0 {
				t.Fatalf("left after the receive: %+v", left)
			}
		})
	}
}

// TestMprobeLeftovers: a matched message never received is reported as
// unreceived, and marked as a probe's.
func TestMprobeLeftovers(t *testing.T) {
	run(t, 2, func(ep *Endpoint) error {
		if ep.Rank() == 0 {
			return ep.Send(msg(77, 0), 1, 4, 6, Standard)
		}
		if _, _, err := ep.Mprobe(0, 4, 6); err != nil {
			return err
		}
		left, n := ep.Leftovers(10)
		want := Leftover{Kind: Unreceived, Peer: 0, Tag: 4, Ctx: 6, Bytes: 77, Probed: true}
		if n != 1 || len(left) != 1 || left[0] != want {
			return fmt.Errorf("leftovers %+v (%d), want %+v", left, n, want)
		}
		return nil
	})
}

// TestMprobeNotCancelled: a send whose message a matched probe took is no
// longer cancelled; its receive gets it whole.
func TestMprobeNotCancelled(t *testing.T) {
	run(t, 2, func(ep *Endpoint) error {
		const n = 100000 // rendezvous: the send waits for its receive
		if ep.Rank() == 0 {
			r, err := ep.Isend(msg(n, 3), 1, 8, 0, Standard)
			if err != nil {
				return err
			}
			if _, err := ep.Recv(nil, 1, 1, 0); err != nil { // probed
				return err
			}
			r.Cancel()
			if err := ep.Send(nil, 1, 2, 0, Standard); err != nil {
				return err
			}
			st, err := r.Wait()
			if err != nil || st.Cancelled {
				return fmt.Errorf("send of a matched message: %+v %v, want complete, not cancelled", st, err)
			}
			return nil
		}
		m, _, err := ep.Mprobe(0, 8, 0)
		if err != nil {
			return err
		}
		if err := ep.Send(nil, 0, 1, 0, Standard); err != nil {
			return err
		}
		if _, err := ep.Recv(nil, 0, 2, 0); err != nil { // the cancel has been answered
			return err
		}
		buf := make([]byte, n)
		if st, err := ep.Mrecv(m, buf); err != nil || st.Count != n || !bytes.Equal(buf, msg(n, 3)) {
			return fmt.Errorf("matched message: %+v %v", st, err)
		}
		return nil
	})
}

// TestMprobeAllocs: a matched probe and its receive, the message already
// here, allocate nothing.
func TestMprobeAllocs(t *testing.T) {
	if raceEnabled {
		testskip.Skip(t, testskip.RaceDetector, "the race detector allocates")
	}
	ep := rankZero(t)
	buf := make([]byte, 64)
	once := func() {
		if err := ep.Send(buf, 0, 1, 0, Standard); err != nil {
			t.Fatal(err)
		}
		m, _, err := ep.Mprobe(0, 1, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ep.Mrecv(m, buf); err != nil {
			t.Fatal(err)
		}
	}
	once()
	if n := testing.AllocsPerRun(200, once); n != 0 {
		t.Fatalf("%.1f allocations per Send, Mprobe and Mrecv", n)
	}
}

// TestMprobeContext: a matched probe whose context ends first returns the
// context's error and has taken nothing: the message sent after is the
// next receive's. One that finds its message returns it, the context
// ended or not.
func TestMprobeContext(t *testing.T) {
	run(t, 2, func(ep *Endpoint) error {
		if ep.Rank() == 0 {
			if _, err := ep.Recv(nil, 1, 1, 0); err != nil { // the probes have ended
				return err
			}
			if err := ep.Send(msg(30, 0), 1, 2, 0, Standard); err != nil {
				return err
			}
			return ep.Send(msg(40, 0), 1, 2, 0, Standard)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		if _, _, err := ep.MprobeContext(ctx, 0, 2, 0); !errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("probe past its deadline: %v", err)
		}
		cctx, cancel2 := context.WithCancel(context.Background())
		time.AfterFunc(10*time.Millisecond, cancel2)
		if _, _, err := ep.MprobeContext(cctx, AnySource, AnyTag, 0); !errors.Is(err, context.Canceled) {
			return fmt.Errorf("cancelled probe: %v", err)
		}
		if err := ep.Send(nil, 0, 1, 0, Standard); err != nil {
			return err
		}
		buf := make([]byte, 30)
		if st, err := ep.Recv(buf, 0, 2, 0); err != nil || st.Count != 30 {
			return fmt.Errorf("first message after the probes: %+v %v", st, err)
		}
		if _, err := ep.Probe(0, 2, 0); err != nil { // the second is here
			return err
		}
		m, st, err := ep.MprobeContext(cctx, 0, 2, 0) // ended, but the message is here
		if err != nil || st.Count != 40 {
			return fmt.Errorf("probe with an ended context of a message here: %+v %v", st, err)
		}
		_, err = ep.Mrecv(m, make([]byte, 40))
		return err
	})
}

// TestMprobeLooksOnce: the condition a waiting Mprobe gives WaitUntil,
// which a wait may ask more than once after it held (a parking
// goroutine's check, then the loop's), takes one message only.
func TestMprobeLooksOnce(t *testing.T) {
	ep := rankZero(t)
	for i := range 2 {
		if err := ep.Send(msg(10+i, i), 0, 3, 0, Standard); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ep.Probe(0, 3, 0); err != nil {
		t.Fatal(err)
	}
	w := mproberPool.Get().(*mprober)
	w.ep, w.src, w.tag = ep, 0, 3
	if !w.ready() || !w.ready() {
		t.Fatal("the condition did not hold with messages here")
	}
	m := w.m
	w.done()
	if st, ok, err := ep.Iprobe(0, 3, 0); !ok || err != nil || st.Count != 11 {
		t.Fatalf("the second message is not the next one found: %+v %v %v", st, ok, err)
	}
	buf := make([]byte, 10)
	if st, err := ep.Mrecv(m, buf); err != nil || st.Count != 10 || !bytes.Equal(buf, msg(10, 0)) {
		t.Fatalf("the message taken: %+v %v", st, err)
	}
}
