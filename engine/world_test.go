package engine

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/tachyon-hpc/tachyon/cvar"
	"github.com/tachyon-hpc/tachyon/internal/testcvar"
	"github.com/tachyon-hpc/tachyon/internal/testskip"
)

// run runs fn on every rank of a new world of n ranks, as goroutines, and
// fails the test with every rank's error.
func run(t testing.TB, n int, fn func(ep *Endpoint) error) {
	t.Helper()
	w, err := NewWorld(n)
	if err != nil {
		t.Fatal(err)
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = fn(w.Endpoint(i))
			w.Endpoint(i).Close()
		}()
	}
	wg.Wait()
	failed := false
	for i, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", i, err) // every rank's: a rank's error may follow from another's
			failed = true
		}
	}
	if failed {
		t.FailNow()
	}
}

// rankZero returns rank 0 of a new two-rank in-process world; both ranks
// are closed when the test ends.
func rankZero(t testing.TB) *Endpoint {
	t.Helper()
	ep, _ := twoRanks(t)
	return ep
}

// twoRanks returns the two ranks of a new in-process world, closed when
// the test ends (a test may close either earlier).
func twoRanks(t testing.TB) (*Endpoint, *Endpoint) {
	t.Helper()
	w, err := NewWorld(2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		w.Endpoint(0).Close()
		w.Endpoint(1).Close()
	})
	return w.Endpoint(0), w.Endpoint(1)
}

func msg(n, seed int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*31 + seed)
	}
	return b
}

func TestSendRecvSizes(t *testing.T) {
	sizes := []int{0, 1, 8, 900, 1000, 1024, 5000, 16 << 10, 16<<10 + 1, 100 << 10, 1 << 20}
	for _, mode := range []Mode{Standard, Synchronous} {
		run(t, 2, func(ep *Endpoint) error {
			for k, n := range sizes {
				if ep.Rank() == 0 {
					if err := ep.Send(msg(n, k), 1, k, 0, mode); err != nil {
						return err
					}
					continue
				}
				buf := make([]byte, n)
				st, err := ep.Recv(buf, 0, k, 0)
				if err != nil {
					return err
				}
				if st.Count != n || st.Source != 0 || st.Tag != k || !bytes.Equal(buf, msg(n, k)) {
					return fmt.Errorf("mode %d size %d: status %+v", mode, n, st)
				}
			}
			return nil
		})
	}
}

func TestUnexpectedAndOrder(t *testing.T) {
	const count = 300
	sizes := []int{8, 3000, 40000}
	run(t, 2, func(ep *Endpoint) error {
		if ep.Rank() == 0 {
			var reqs []*Request
			for i := 0; i < count; i++ {
				r, err := ep.Isend(msg(sizes[i%3], i), 1, i%2, 7, Standard)
				if err != nil {
					return err
				}
				reqs = append(reqs, r)
			}
			// Rendezvous sends complete only once received: announce the
			// end first.
			if err := ep.Send(nil, 1, 99, 7, Standard); err != nil {
				return err
			}
			for _, r := range reqs {
				if _, err := r.Wait(); err != nil {
					return err
				}
			}
			return nil
		}
		// Wait for the last message so the others are unexpected, then
		// receive per tag: order within a tag is sending order.
		if _, err := ep.Recv(nil, 0, 99, 7); err != nil {
			return err
		}
		for _, tag := range []int{1, 0} {
			for i := tag; i < count; i += 2 {
				buf := make([]byte, 40000)
				st, err := ep.Recv(buf, AnySource, tag, 7)
				if err != nil {
					return err
				}
				if st.Count != sizes[i%3] || !bytes.Equal(buf[:st.Count], msg(sizes[i%3], i)) {
					return fmt.Errorf("tag %d message %d: %+v", tag, i, st)
				}
			}
		}
		return nil
	})
}

func TestWildcardOrder(t *testing.T) {
	run(t, 3, func(ep *Endpoint) error {
		switch ep.Rank() {
		case 0:
			// Post receives in an order mixing wildcards; each message
			// must go to the earliest posted receive it matches.
			r1, _ := ep.Irecv(make([]byte, 8), AnySource, 5, 0)
			r2, _ := ep.Irecv(make([]byte, 8), 1, AnyTag, 0)
			r3, _ := ep.Irecv(make([]byte, 8), 1, 5, 0)
			if err := ep.Send(nil, 1, 0, 1, Standard); err != nil { // go
				return err
			}
			st1, _ := r1.Wait()
			st2, _ := r2.Wait()
			st3, _ := r3.Wait()
			if st1.Count != 1 || st2.Count != 2 || st3.Count != 3 {
				return fmt.Errorf("got %+v %+v %+v", st1, st2, st3)
			}
		case 1:
			if _, err := ep.Recv(nil, 0, 0, 1); err != nil {
				return err
			}
			for n := 1; n <= 3; n++ {
				if err := ep.Send(make([]byte, n), 0, 5, 0, Standard); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

func TestTruncate(t *testing.T) {
	for _, n := range []int{100, 5000, 200000} {
		run(t, 2, func(ep *Endpoint) error {
			if ep.Rank() == 0 {
				return ep.Send(msg(n, 1), 1, 0, 0, Standard)
			}
			buf := make([]byte, 50)
			st, err := ep.Recv(buf, 0, 0, 0)
			if !errors.Is(err, ErrTruncate) || st.Count != 50 || !bytes.Equal(buf, msg(n, 1)[:50]) {
				return fmt.Errorf("size %d: %+v %v", n, st, err)
			}
			return nil
		})
	}
}

func TestSelf(t *testing.T) {
	run(t, 1, func(ep *Endpoint) error {
		for _, n := range []int{8, 10000, 300000} {
			r, err := ep.Irecv(make([]byte, n), 0, 3, 0)
			if err != nil {
				return err
			}
			if err := ep.Send(msg(n, 2), 0, 3, 0, Standard); err != nil {
				return err
			}
			st, err := r.Wait()
			if err != nil || st.Count != n {
				return fmt.Errorf("self %d: %+v %v", n, st, err)
			}
		}
		return nil
	})
}

func TestProbeAndCancel(t *testing.T) {
	run(t, 2, func(ep *Endpoint) error {
		if ep.Rank() == 0 {
			if err := ep.Send(msg(1234, 0), 1, 4, 0, Standard); err != nil {
				return err
			}
			// A rendezvous send nobody receives can be withdrawn.
			r, err := ep.Isend(msg(100000, 0), 1, 8, 0, Standard)
			if err != nil {
				return err
			}
			if err := ep.Send(nil, 1, 5, 0, Standard); err != nil {
				return err
			}
			if _, err := ep.Recv(nil, 1, 6, 0); err != nil {
				return err
			}
			r.Cancel()
			st, err := r.Wait()
			if err != nil || !st.Cancelled {
				return fmt.Errorf("cancel send: %+v %v", st, err)
			}
			return ep.Send(nil, 1, 7, 0, Standard)
		}
		st, err := ep.Probe(AnySource, AnyTag, 0)
		if err != nil || st.Count != 1234 || st.Tag != 4 {
			return fmt.Errorf("probe: %+v %v", st, err)
		}
		if _, err := ep.Recv(make([]byte, 1234), 0, 4, 0); err != nil {
			return err
		}
		r, _ := ep.Irecv(nil, 0, 77, 0)
		r.Cancel()
		if st, err := r.Wait(); err != nil || !st.Cancelled {
			return fmt.Errorf("cancel recv: %+v %v", st, err)
		}
		if _, err := ep.Recv(nil, 0, 5, 0); err != nil {
			return err
		}
		if err := ep.Send(nil, 0, 6, 0, Standard); err != nil {
			return err
		}
		if _, err := ep.Recv(nil, 0, 7, 0); err != nil {
			return err
		}
		if _, ok, _ := ep.Iprobe(0, 8, 0); ok {
			return fmt.Errorf("cancelled message still there")
		}
		return nil
	})
}

func TestBuffered(t *testing.T) {
	run(t, 2, func(ep *Endpoint) error {
		if ep.Rank() == 0 {
			if err := ep.Send(msg(10, 0), 1, 0, 0, Buffered); !errors.Is(err, ErrBuffer) {
				return fmt.Errorf("bsend without buffer: %v", err)
			}
			ep.BufferAttach(make([]byte, 100000))
			for i := 0; i < 3; i++ {
				if err := ep.Send(msg(30000, i), 1, i, 0, Buffered); err != nil {
					return err
				}
			}
			if err := ep.Send(msg(30000, 9), 1, 9, 0, Buffered); !errors.Is(err, ErrBuffer) {
				return fmt.Errorf("bsend over the buffer: %v", err)
			}
			_, err := ep.BufferDetach()
			return err
		}
		for i := 2; i >= 0; i-- {
			buf := make([]byte, 30000)
			if _, err := ep.Recv(buf, 0, i, 0); err != nil || !bytes.Equal(buf, msg(30000, i)) {
				return fmt.Errorf("bsend %d: %v", i, err)
			}
		}
		return nil
	})
}

func TestPeerExit(t *testing.T) {
	run(t, 2, func(ep *Endpoint) error {
		if ep.Rank() == 0 {
			return ep.Send(msg(8, 0), 1, 0, 0, Standard)
		}
		if _, err := ep.Recv(make([]byte, 8), 0, 0, 0); err != nil {
			return err
		}
		_, err := ep.Recv(make([]byte, 8), 0, 1, 0)
		if !errors.Is(err, ErrPeerDead) {
			return fmt.Errorf("recv from exited rank: %v", err)
		}
		if err := ep.Send(msg(100000, 0), 0, 0, 0, Standard); !errors.Is(err, ErrPeerDead) {
			return fmt.Errorf("send to exited rank: %v", err)
		}
		return nil
	})
}

// TestCancelDeliveredEager is MPI-4.1's Example 8.11: an eager send whose
// data already left is still cancelled while the receiver has not matched
// it, and Wait reports it cancelled.
// TestBadArgs: a rank outside the world or a tag that is not one is an
// error, never a panic.
func TestBadArgs(t *testing.T) {
	ep := rankZero(t)
	buf := make([]byte, 8)
	for _, c := range []struct {
		rank, tag int
		want      error
	}{{2, 0, ErrRank}, {-1, 0, ErrRank}, {-2, 0, ErrRank}, {1, -1, ErrTag}, {1, -5, ErrTag}, {1, 1 << 40, ErrTag}} {
		sends := map[string]error{
			"Send": ep.Send(buf, c.rank, c.tag, 0, Standard),
		}
		_, sends["Isend"] = ep.Isend(buf, c.rank, c.tag, 0, Standard)
		_, _, sends["IsendNow"] = isendNow(ep, buf, c.rank, c.tag, 0, Standard)
		for name, err := range sends {
			if !errors.Is(err, c.want) {
				t.Errorf("%s to %d, tag %d: %v, want %v", name, c.rank, c.tag, err, c.want)
			}
		}
		if c.rank == -1 || c.tag == -1 {
			continue // AnySource and AnyTag receive
		}
		recvs := map[string]error{}
		_, recvs["Recv"] = ep.Recv(buf, c.rank, c.tag, 0)
		_, recvs["Irecv"] = ep.Irecv(buf, c.rank, c.tag, 0)
		_, _, recvs["Iprobe"] = ep.Iprobe(c.rank, c.tag, 0)
		_, recvs["Probe"] = ep.Probe(c.rank, c.tag, 0)
		for name, err := range recvs {
			if !errors.Is(err, c.want) {
				t.Errorf("%s from %d, tag %d: %v, want %v", name, c.rank, c.tag, err, c.want)
			}
		}
	}
}

// TestIsendNow: a standard or ready send that fits one short packet goes
// out at once without a request; others are started as Isend starts
// them, and a buffered send with no buffer attached is refused as Isend
// refuses it. A send that does not go out at once leaves the caller's
// Sent zero, also one that found no room left on the link after IsendNow
// had written the Sent (a receiver that does not read yet).
func TestIsendNow(t *testing.T) {
	started := []struct {
		n    int
		mode Mode
	}{{8, Synchronous}, {100000, Standard}, {100000, Ready}}
	run(t, 2, func(ep *Endpoint) error {
		if ep.Rank() == 0 {
			for _, mode := range []Mode{Standard, Ready} {
				s, r, err := isendNow(ep, msg(8, int(mode)), 1, 1, 0, mode)
				if err != nil || r != nil || !s.Valid() {
					return fmt.Errorf("mode %d: IsendNow = %+v, %v, %v", mode, s, r, err)
				}
			}
			if s, r, err := isendNow(ep, msg(8, 0), 1, 2, 0, Buffered); !errors.Is(err, ErrBuffer) || r != nil || s.Valid() {
				return fmt.Errorf("buffered, no buffer: IsendNow = %+v, %v, %v; want ErrBuffer", s, r, err)
			}
			junk := Sent{destCtx: 1, tagSID: 1 << 32}
			for i, c := range started {
				s := junk
				r, err := ep.IsendNow(msg(c.n, i), 1, 2, 0, c.mode, &s)
				if err != nil || r == nil || s != (Sent{}) {
					return fmt.Errorf("%d bytes, mode %d: IsendNow = %+v, %v, %v; want a request and the zero Sent", c.n, c.mode, s, r, err)
				}
				if err := r.WaitErr(); err != nil {
					return fmt.Errorf("%d bytes, mode %d: %v", c.n, c.mode, err)
				}
			}
			// Tag 3 until the link is full: the send that finds no room
			// is queued, and its Sent made zero again.
			var full *Request
			n := 0 // the messages sent, the last one queued
			for ; full == nil; n++ {
				if n == 1<<22 {
					return errors.New("the link never filled")
				}
				s := junk
				r, err := ep.IsendNow(msg(8, n), 1, 3, 0, Standard, &s)
				switch {
				case err != nil:
					return err
				case r != nil && s != (Sent{}):
					return fmt.Errorf("send %d, queued for room: the Sent is %+v, want zero", n, s)
				case r == nil && !s.Valid():
					return fmt.Errorf("send %d, out at once: the Sent names nothing", n)
				}
				full = r
			}
			var cnt [8]byte
			binary.LittleEndian.PutUint64(cnt[:], uint64(n))
			if err := ep.Send(cnt[:], 1, 4, 0, Standard); err != nil { // the count follows the messages
				return err
			}
			return full.WaitErr()
		}
		for _, mode := range []Mode{Standard, Ready} {
			buf := make([]byte, 8)
			if st, err := ep.Recv(buf, 0, 1, 0); err != nil || st.Count != 8 || !bytes.Equal(buf, msg(8, int(mode))) {
				return fmt.Errorf("receive %d: %+v %v %v", mode, st, err, buf)
			}
		}
		for i, c := range started {
			buf := make([]byte, c.n)
			if st, err := ep.Recv(buf, 0, 2, 0); err != nil || st.Count != c.n || !bytes.Equal(buf, msg(c.n, i)) {
				return fmt.Errorf("receive %d bytes, mode %d: %+v %v", c.n, c.mode, st, err)
			}
		}
		// The count of tag 3's messages comes after them: receiving it
		// first takes them all in as unexpected, room for the sender.
		var cnt [8]byte
		if _, err := ep.Recv(cnt[:], 0, 4, 0); err != nil {
			return err
		}
		for n := range int(binary.LittleEndian.Uint64(cnt[:])) {
			buf := make([]byte, 8)
			if st, err := ep.Recv(buf, 0, 3, 0); err != nil || st.Count != 8 || !bytes.Equal(buf, msg(8, n)) {
				return fmt.Errorf("message %d of the full link: %+v %v %x", n, st, err, buf)
			}
		}
		return nil
	})
}

// TestIsendNowImpaired: IsendNow's usual case checks the endpoint's
// impaired flag for both a closed endpoint and a dead peer. With one peer
// gone, a send to another still arrives whole, by the general way; one
// to the dead peer fails with ErrPeerDead; and on a closed endpoint
// IsendNow fails with ErrClosed.
func TestIsendNowImpaired(t *testing.T) {
	skipOnLossyNetwork(t)
	w, err := NewWorld(3)
	if err != nil {
		t.Fatal(err)
	}
	ep, live, gone := w.Endpoint(0), w.Endpoint(1), w.Endpoint(2)
	defer live.Close()
	setSerial(t, ep, true)
	gone.Close()
	// A receive from the closed rank finds it gone and impairs ep.
	if _, err := ep.Recv(make([]byte, 8), 2, 1, 0); !errors.Is(err, ErrPeerDead) {
		t.Fatalf("receive from a closed peer: %v", err)
	}
	if _, r, err := isendNow(ep, msg(8, 1), 2, 1, 0, Standard); !errors.Is(err, ErrPeerDead) && (r == nil || !errors.Is(r.WaitErr(), ErrPeerDead)) {
		t.Fatalf("IsendNow to the dead peer: %v, want ErrPeerDead", err)
	}
	s, r, err := isendNow(ep, msg(8, 2), 1, 1, 0, Standard)
	if err != nil {
		t.Fatalf("IsendNow to a live peer beside a dead one: %v", err)
	}
	if r != nil {
		if err := r.WaitErr(); err != nil {
			t.Fatalf("IsendNow to a live peer beside a dead one: %v", err)
		}
	} else if !s.Valid() {
		t.Fatalf("IsendNow to a live peer: neither a request nor a message sent")
	}
	buf := make([]byte, 8)
	if st, err := live.Recv(buf, 0, 1, 0); err != nil || st.Count != 8 || !bytes.Equal(buf, msg(8, 2)) {
		t.Fatalf("the live peer received %+v, %v, %x", st, err, buf)
	}
	ep.Close()
	if s, r, err := isendNow(ep, msg(8, 3), 1, 1, 0, Standard); !errors.Is(err, ErrClosed) || r != nil || s.Valid() {
		t.Fatalf("IsendNow on a closed endpoint: %+v, %v, %v; want ErrClosed", s, r, err)
	}
}

// TestCancelSent: the cancel of a message IsendNow sent withdraws it while
// unmatched, and only it (the short id tells apart two messages of one
// tag); after the match the message stands.
func TestCancelSent(t *testing.T) {
	run(t, 2, func(ep *Endpoint) error {
		if ep.Rank() == 0 {
			if _, err := ep.CancelSent(Sent{}); !errors.Is(err, ErrRequest) {
				return fmt.Errorf("CancelSent of nothing: %v, want ErrRequest", err)
			}
			a, _, err := isendNow(ep, msg(8, 1), 1, 1, 0, Standard)
			if err != nil {
				return err
			}
			b, er, err := isendNow(ep, msg(8, 2), 1, 1, 0, Standard)
			if err != nil || er != nil || a == b {
				return fmt.Errorf("second IsendNow: %+v %v %v (first %+v)", b, er, err, a)
			}
			if _, err := ep.Recv(nil, 1, 2, 0); err != nil { // both have arrived
				return err
			}
			r, err := ep.CancelSent(b)
			if err != nil {
				return err
			}
			if st, err := r.Wait(); err != nil || !st.Cancelled {
				return fmt.Errorf("cancel: %+v %v", st, err)
			}
			if err := ep.Send(nil, 1, 3, 0, Standard); err != nil {
				return err
			}
			if _, err := ep.Recv(nil, 1, 4, 0); err != nil { // a is received
				return err
			}
			r, err = ep.CancelSent(a)
			if err != nil {
				return err
			}
			if st, err := r.Wait(); err != nil || st.Cancelled {
				return fmt.Errorf("cancel after the match: %+v %v", st, err)
			}
			return ep.Send(nil, 1, 5, 0, Standard)
		}
		return cancelReceiver(ep, func() error {
			if _, err := ep.Recv(nil, 0, 3, 0); err != nil {
				return err
			}
			buf := make([]byte, 8)
			if _, err := ep.Recv(buf, 0, 1, 0); err != nil || !bytes.Equal(buf, msg(8, 1)) {
				return fmt.Errorf("received %v %v, want the first message", buf, err)
			}
			return nil
		})
	})
}

func TestCancelDeliveredEager(t *testing.T) {
	run(t, 2, func(ep *Endpoint) error {
		if ep.Rank() == 0 {
			r, err := ep.Isend(msg(8, 0), 1, 1, 0, Standard)
			if err != nil {
				return err
			}
			if _, err := ep.Recv(nil, 1, 2, 0); err != nil { // the message has arrived
				return err
			}
			if err := r.Cancel(); err != nil {
				return err
			}
			st, err := r.Wait()
			if err != nil || !st.Cancelled {
				return fmt.Errorf("cancel: %+v %v", st, err)
			}
			// A send the receiver matched cannot be cancelled.
			r, _ = ep.Isend(msg(8, 0), 1, 3, 0, Standard)
			if _, err := ep.Recv(nil, 1, 4, 0); err != nil {
				return err
			}
			r.Cancel()
			if st, err := r.Wait(); err != nil || st.Cancelled {
				return fmt.Errorf("cancel after match: %+v %v", st, err)
			}
			return ep.Send(nil, 1, 5, 0, Standard)
		}
		return cancelReceiver(ep, func() error {
			_, err := ep.Recv(make([]byte, 8), 0, 3, 0)
			return err
		})
	})
}

// cancelReceiver is rank 1 of a test of cancelling sent messages: it
// waits until rank 0's message of tag 1 has arrived and says so (tag 2),
// lets rank 0 cancel and runs match (its receives while rank 0 does), says
// it is done (tag 4), waits for rank 0 to be done (tag 5), and checks
// that no message of tag 1 is left: the cancelled one is gone.
func cancelReceiver(ep *Endpoint, match func() error) error {
	for !func() bool { _, ok, _ := ep.Iprobe(0, 1, 0); return ok }() {
	}
	if err := ep.Send(nil, 0, 2, 0, Standard); err != nil {
		return err
	}
	if err := match(); err != nil {
		return err
	}
	if err := ep.Send(nil, 0, 4, 0, Standard); err != nil {
		return err
	}
	if _, err := ep.Recv(nil, 0, 5, 0); err != nil {
		return err
	}
	if _, ok, _ := ep.Iprobe(0, 1, 0); ok {
		return fmt.Errorf("cancelled message still there")
	}
	return nil
}

// TestPostedShortPath: short messages delivered straight to their posted
// receives (shortToPosted), in the cases that path must leave to the
// general one and with the posted lists of more keys than the matcher
// keeps: each receive gets its own message, in posting order per key, a
// dropped list is not found again through the lookup cache, and a
// truncated or wildcard receive still gets what the general path gives.
func TestPostedShortPath(t *testing.T) {
	for _, serial := range []bool{false, true} {
		w, err := NewWorld(1)
		if err != nil {
			t.Fatal(err)
		}
		ep := w.Endpoint(0)
		setSerial(t, ep, serial)
		ep.m.maxLists = 4 // lists are dropped once empty beyond 4 keys
		const keys, per = 12, 3
		for round := 0; round < 3; round++ {
			bufs := make([][]byte, keys*per)
			reqs := make([]*Request, keys*per)
			for i := range reqs {
				bufs[i] = make([]byte, 8)
				if reqs[i], err = ep.Irecv(bufs[i], 0, i%keys, uint32(round%2)); err != nil {
					t.Fatal(err)
				}
			}
			for n := 0; n < per; n++ {
				for k := keys - 1; k >= 0; k-- {
					msg := []byte{byte(k), byte(n), byte(round), 0, 0, 0, 0, 0}
					if err := ep.Send(msg, 0, k, uint32(round%2), Standard); err != nil {
						t.Fatal(err)
					}
				}
			}
			for i, r := range reqs {
				st, err := r.Wait()
				if err != nil {
					t.Fatal(err)
				}
				k, n := i%keys, i/keys
				if st.Tag != k || st.Source != 0 || st.Count != 8 || bufs[i][0] != byte(k) || bufs[i][1] != byte(n) || bufs[i][2] != byte(round) {
					t.Fatalf("serial %v round %d: receive %d (tag %d, #%d) got %v, status %+v", serial, round, i, k, n, bufs[i][:3], st)
				}
			}
			if got := len(ep.m.posted); got > ep.m.maxLists {
				t.Errorf("serial %v round %d: %d posted lists kept, at most %d wanted", serial, round, got, ep.m.maxLists)
			}
		}
		// Too small a buffer: the general path's truncation error.
		small := make([]byte, 4)
		r, _ := ep.Irecv(small, 0, 1, 0)
		ep.Send([]byte("12345678"), 0, 1, 0, Standard)
		if st, err := r.Wait(); !errors.Is(err, ErrTruncate) || st.Count != 4 || string(small) != "1234" {
			t.Errorf("serial %v: truncated receive: %v, %+v, %q", serial, err, st, small)
		}
		// A wildcard receive posted before an exact one takes the first message.
		any, _ := ep.Irecv(make([]byte, 8), AnySource, AnyTag, 0)
		exact, _ := ep.Irecv(make([]byte, 8), 0, 5, 0)
		ep.Send([]byte("a"), 0, 5, 0, Standard)
		ep.Send([]byte("b"), 0, 5, 0, Standard)
		if st, _ := any.Wait(); st.Tag != 5 || st.Count != 1 {
			t.Errorf("serial %v: wildcard receive: %+v", serial, st)
		}
		if st, _ := exact.Wait(); st.Count != 1 {
			t.Errorf("serial %v: exact receive after a wildcard: %+v", serial, st)
		}
		ep.Close()
	}
}

// TestPeerCheckLeavesPackets: the peer check, which reads whether a peer
// that closed left packets behind, leaves them for the next poll: none is
// skipped or handled twice.
func TestPeerCheckLeavesPackets(t *testing.T) {
	a, b := twoRanks(t)
	msgs := []string{"one", "two", "three"}
	for i, m := range msgs {
		if err := b.Send([]byte(m), 0, i, 0, Standard); err != nil {
			t.Fatal(err)
		}
	}
	b.Close()
	for range 3 {
		a.lock()
		a.checkPeers()
		a.unlock()
	}
	if a.peers[1].dead != nil {
		t.Fatalf("rank 1 taken for dead with packets still to read: %v", a.peers[1].dead)
	}
	for i, m := range msgs {
		buf := make([]byte, 8)
		r, err := a.Irecv(buf, 1, i, 0)
		if err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for {
			st, done, err := r.Test()
			if done {
				if err != nil || string(buf[:st.Count]) != m {
					t.Fatalf("message %d: %q, %v", i, buf[:st.Count], err)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("message %d (%q) never came", i, m)
			}
		}
	}
}

// TestRequestOwner: what SetOwner stores in a request's slot outlives the
// request: the slot's next request finds it (the pool is a stack), and a
// request the pool has not handed out before has none. Status and error
// do not leak from one use of a slot to the next, with a lock or in
// serial mode (where Wait gives the request back in line).
func TestRequestOwner(t *testing.T) {
	for _, serial := range []bool{false, true} {
		t.Run(fmt.Sprint("serial=", serial), func(t *testing.T) { testRequestOwner(t, serial) })
	}
}

func testRequestOwner(t *testing.T, serial bool) {
	w, err := NewWorld(1)
	if err != nil {
		t.Fatal(err)
	}
	ep := w.Endpoint(0)
	defer ep.Close()
	if err := ep.SetSerial(serial); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 8)
	r, err := ep.Irecv(buf, 0, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	if r.Owner() != nil {
		t.Fatalf("a fresh request has owner %v", r.Owner())
	}
	owner := new(int)
	r.SetOwner(owner)
	if err := ep.Send(buf[:3], 0, 1, 0, Standard); err != nil {
		t.Fatal(err)
	}
	if st, err := r.Wait(); err != nil || st.Count != 3 {
		t.Fatalf("Wait: %+v %v", st, err)
	}
	r2, err := ep.Irecv(buf, 0, 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	if r2 != r {
		t.Fatal("the pool did not hand the slot out again")
	}
	if r2.Owner() != any(owner) {
		t.Errorf("the slot's owner is %v, want %v", r2.Owner(), owner)
	}
	if r2.Done() || r2.Status() != (Status{}) || r2.Err() != nil {
		t.Errorf("the slot's new request starts done %v, status %+v, error %v", r2.Done(), r2.Status(), r2.Err())
	}
	r3, err := ep.Irecv(buf, 0, 3, 0)
	if err != nil {
		t.Fatal(err)
	}
	if r3.Owner() != nil {
		t.Errorf("another slot has owner %v", r3.Owner())
	}
	r2.Cancel()
	r3.Cancel()
	r2.Wait()
	r3.Wait()
}

// TestIrecvUsualBailsOut: Irecv posts in line only in the usual case (a
// serial endpoint, the key's list the one last looked up); each thing
// that makes a case unusual, with that list cached, still gets the general
// path's answer: an unexpected message is taken at once, a tag beyond
// int32 or a bad rank is an error (not the cached key's alias), a dead
// peer fails the receive at once, a closed endpoint refuses it.
func TestIrecvUsualBailsOut(t *testing.T) {
	skipOnLossyNetwork(t)
	ep, peer := twoRanks(t)
	setSerial(t, ep, true)
	const tag = 7
	post := func() *Request {
		t.Helper()
		r, err := ep.Irecv(make([]byte, 8), 1, tag, 0)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	// The key's list made and cached; a second receive behind the first.
	r1, r2 := post(), post()
	for i := 0; i < 3; i++ {
		if err := peer.Send([]byte{byte(i), 0, 0, 0, 0, 0, 0, 0}, 0, tag, 0, Standard); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range []*Request{r1, r2} {
		if _, err := r.Wait(); err != nil {
			t.Fatal(err)
		}
	}
	// The third message is unexpected by now (the waits polled it in):
	// a receive takes it at once, not posted behind nothing.
	r3 := post()
	if !r3.Done() {
		t.Fatal("a receive with its message waiting in the unexpected queue was posted")
	}
	if st, err := r3.Wait(); err != nil || st.Count != 8 {
		t.Fatalf("receive of the unexpected message: %+v, %v", st, err)
	}
	// Arguments the cached key would alias when cut to 32 bits.
	if _, err := ep.Irecv(make([]byte, 8), 1, tag+1<<32, 0); !errors.Is(err, ErrTag) {
		t.Fatalf("tag %d: %v, want ErrTag", tag+1<<32, err)
	}
	if _, err := ep.Irecv(make([]byte, 8), 1+1<<32, tag, 0); !errors.Is(err, ErrRank) {
		t.Fatalf("rank %d: %v, want ErrRank", 1+1<<32, err)
	}
	// The peer gone: a blocking receive finds it, and the next receive of
	// the cached key fails at once.
	peer.Close()
	if _, err := ep.Recv(make([]byte, 8), 1, tag, 0); !errors.Is(err, ErrPeerDead) {
		t.Fatalf("receive from a closed peer: %v", err)
	}
	r4 := post()
	if _, done, err := r4.Test(); !done || !errors.Is(err, ErrPeerDead) {
		t.Fatalf("receive of the cached key from a dead peer: done %v, %v", done, err)
	}
	// A closed endpoint whose peer lives.
	w2, err := NewWorld(2)
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Endpoint(1).Close()
	ep = w2.Endpoint(0)
	setSerial(t, ep, true)
	post()
	ep.Close()
	if _, err := ep.Irecv(make([]byte, 8), 1, tag, 0); !errors.Is(err, ErrClosed) {
		t.Fatalf("receive on a closed endpoint: %v", err)
	}
}

// TestRecvDirect checks a serial endpoint's blocking receive that takes
// its message from the source's inbox itself (recvDirect): that it does
// so in the usual case, and that every case it must leave to the general
// way gets there with the message it should.
func TestRecvDirect(t *testing.T) {
	skipOnNetwork(t, "a receive reading its source's record ring directly")
	ep, peer := twoRanks(t)
	setSerial(t, ep, true)
	sendCtx := func(b byte, n, tag int, ctx uint32) {
		t.Helper()
		msg := make([]byte, n)
		msg[0] = b
		if err := peer.Send(msg, 0, tag, ctx, Standard); err != nil {
			t.Fatal(err)
		}
	}
	send := func(b byte, n, tag int) { t.Helper(); sendCtx(b, n, tag, 0) }
	recv := func(n, src, tag int) (byte, Status, error) {
		t.Helper()
		buf := make([]byte, n)
		st, err := ep.Recv(buf, src, tag, 0)
		return buf[0], st, err
	}
	want := func(what string, b, wb byte, st Status, err error, tag, count int) {
		t.Helper()
		if err != nil || b != wb || st.Source != 1 || st.Tag != tag || st.Count != count {
			t.Fatalf("%s: byte %d, %+v, %v; want byte %d, tag %d, count %d", what, b, st, err, wb, tag, count)
		}
	}

	// The usual case: taken without posting a request.
	seq := ep.m.postSeq
	send(1, 8, 5)
	b, st, err := recv(8, 1, 5)
	want("usual", b, 1, st, err, 5, 8)
	if ep.m.postSeq != seq {
		t.Fatal("a receive of the usual case posted a request")
	}

	// Another tag's message first: it goes unexpected, and a later
	// receive of its tag finds it.
	send(2, 8, 6)
	send(3, 8, 5)
	b, st, err = recv(8, 1, 5)
	want("behind another tag", b, 3, st, err, 5, 8)
	b, st, err = recv(8, 1, 6)
	want("the other tag's", b, 2, st, err, 6, 8)

	// Another context's message of the same tag first.
	sendCtx(10, 8, 5, 2)
	send(11, 8, 5)
	b, st, err = recv(8, 1, 5)
	want("behind another context", b, 11, st, err, 5, 8)
	buf := make([]byte, 8)
	if st, err := ep.Recv(buf, 1, 5, 2); err != nil || buf[0] != 10 || st.Count != 8 {
		t.Fatalf("the other context's: %+v, %v, byte %d", st, err, buf[0])
	}

	// A message longer than the buffer: truncated the general way.
	send(4, 16, 5)
	if _, st, err = recv(8, 1, 5); !errors.Is(err, ErrTruncate) || st.Count != 8 {
		t.Fatalf("truncation: %+v, %v", st, err)
	}

	// A receive posted before, a wildcard's, takes the first message.
	wbuf := make([]byte, 8)
	r, err := ep.Irecv(wbuf, AnySource, 5, 0)
	if err != nil {
		t.Fatal(err)
	}
	send(5, 8, 5)
	send(6, 8, 5)
	b, st, err = recv(8, 1, 5)
	want("behind a posted wildcard", b, 6, st, err, 5, 8)
	if st, err := r.Wait(); err != nil || st.Count != 8 || wbuf[0] != 5 {
		t.Fatalf("the wildcard receive: %+v, %v, byte %d; want byte 5", st, err, wbuf[0])
	}

	// An unexpected message of the same key: it goes first.
	send(7, 8, 5)
	if _, err := ep.Probe(1, 5, 0); err != nil { // polls it in
		t.Fatal(err)
	}
	send(8, 8, 5)
	b, st, err = recv(8, 1, 5)
	want("behind an unexpected one", b, 7, st, err, 5, 8)
	b, st, err = recv(8, 1, 5)
	want("the one after", b, 8, st, err, 5, 8)

	// The receive's own message in packets other than a short one: a
	// synchronous send's and a rendezvous (posted, then matched as its
	// packet is handled).
	big := make([]byte, 4*int(eagerLimit.Get()))
	for i := range big {
		big[i] = byte(i % 251)
	}
	for _, c := range []struct {
		name string
		msg  []byte
		mode Mode
	}{{"synchronous", big[:8], Synchronous}, {"rendezvous", big, Standard}} {
		r, err := peer.Isend(c.msg, 0, 5, 0, c.mode)
		if err != nil {
			t.Fatal(err)
		}
		got := make([]byte, len(c.msg))
		if st, err := ep.Recv(got, 1, 5, 0); err != nil || st.Count != len(c.msg) || !bytes.Equal(got, c.msg) {
			t.Fatalf("%s: %+v, %v, data equal %v", c.name, st, err, bytes.Equal(got, c.msg))
		}
		if _, err := r.Wait(); err != nil {
			t.Fatalf("%s: the send: %v", c.name, err)
		}
	}

	// Eager messages of the largest size in turn: each receive gives
	// back the room the one before took, taking its message directly.
	seq = ep.m.postSeq
	done := make(chan error, 1)
	go func() {
		msg, got := big[:eagerLimit.Get()], make([]byte, eagerLimit.Get())
		for i := 0; i < 64; i++ {
			if err := peer.Send(msg, 0, 5, 0, Standard); err != nil {
				done <- err
				return
			}
			if _, err := ep.Recv(got, 1, 5, 0); err != nil || !bytes.Equal(got, msg) {
				done <- fmt.Errorf("message %d: %v, data equal %v", i, err, bytes.Equal(got, msg))
				return
			}
		}
		done <- nil
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("eager messages in turn: stuck (the receives keep their room)")
	}
	if ep.m.postSeq != seq {
		t.Fatalf("eager messages in turn: %d of 64 receives posted a request", ep.m.postSeq-seq)
	}

	// A message that comes after the direct looks are spent, and with
	// none at all.
	for _, polls := range []string{"1", "0"} {
		testcvar.Set(t, "engine_recv_direct_polls", polls)
		go func() {
			time.Sleep(20 * time.Millisecond)
			send(9, 8, 5)
		}()
		b, st, err = recv(8, 1, 5)
		want("polls "+polls, b, 9, st, err, 5, 8)
	}
}

// isendNow is IsendNow with the Sent it writes returned.
func isendNow(ep *Endpoint, buf []byte, dest, tag int, ctx uint32, mode Mode) (Sent, *Request, error) {
	var s Sent
	r, err := ep.IsendNow(buf, dest, tag, ctx, mode, &s)
	return s, r, err
}

// skipOnNetwork skips a test of what only rings do when engine_net_force
// puts a world's ranks on the network transport.
func skipOnNetwork(t *testing.T, what string) {
	t.Helper()
	if netForce.Get() {
		testskip.Skip(t, testskip.NetForce, "engine_net_force: the network transport has no "+what)
	}
}

// skipOnLossyNetwork skips a test in which a rank stops polling after a
// send went out at once, when engine_net_force runs it over a network
// that loses frames: a lost frame goes again only while its sender polls
// (weak progress), so the receiver would wait for engine_net_peer_timeout.
func skipOnLossyNetwork(t *testing.T) {
	t.Helper()
	if !netForce.Get() {
		return
	}
	for _, name := range []string{"nic_drop_rate", "nic_dup_rate", "nic_reorder_rate"} {
		if v, ok := cvar.Lookup(name); ok && v.String() != "0" {
			testskip.Skip(t, testskip.LossyNetwork, "engine_net_force with "+name+" "+v.String()+": a sender that stops polling does not retransmit")
		}
	}
}
