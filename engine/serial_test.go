package engine

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/tachyon-hpc/tachyon/internal/testcvar"
	"github.com/tachyon-hpc/tachyon/pvar"
)

// TestSerialSendRecv runs eager and rendezvous messages, blocking and
// nonblocking, between two ranks whose endpoints both run serially.
func TestSerialSendRecv(t *testing.T) {
	sizes := []int{0, 8, 1000, 5000, 64 << 10, 1 << 20}
	run(t, 2, func(ep *Endpoint) error {
		if err := ep.SetSerial(true); err != nil {
			return err
		}
		if !ep.serial {
			return errors.New("Serial() is false after SetSerial(true)")
		}
		peer := 1 - ep.Rank()
		for k, n := range sizes {
			want := msg(n, k)
			got := make([]byte, n)
			if ep.Rank() == 0 {
				if err := ep.Send(want, peer, k, 0, Standard); err != nil {
					return err
				}
				if _, err := ep.Recv(got, peer, k, 0); err != nil {
					return err
				}
			} else {
				if _, err := ep.Recv(got, peer, k, 0); err != nil {
					return err
				}
				if err := ep.Send(got, peer, k, 0, Standard); err != nil {
					return err
				}
			}
			if !bytes.Equal(got, want) {
				return fmt.Errorf("%d bytes: payload differs", n)
			}
		}
		// A window of nonblocking sends and receives each way.
		const w = 200
		bufs := make([][]byte, w)
		reqs := make([]*Request, 0, 2*w)
		for i := range w {
			bufs[i] = make([]byte, 16)
			r, err := ep.Irecv(bufs[i], peer, i, 0)
			if err != nil {
				return err
			}
			reqs = append(reqs, r)
		}
		for i := range w {
			r, err := ep.Isend(msg(16, i), peer, i, 0, Standard)
			if err != nil {
				return err
			}
			reqs = append(reqs, r)
		}
		if err := waitAll(reqs); err != nil {
			return err
		}
		for i := range w {
			if !bytes.Equal(bufs[i], msg(16, i)) {
				return fmt.Errorf("window message %d differs", i)
			}
		}
		return nil
	})
}

// TestSetSerialWithProgressGoroutine: an endpoint polled by a dedicated
// progress goroutine cannot run serially.
func TestSetSerialWithProgressGoroutine(t *testing.T) {
	w, err := NewWorld(1)
	if err != nil {
		t.Fatal(err)
	}
	ep := w.Endpoint(0)
	defer ep.Close()
	if err := ep.Progress().Start(-1); err != nil {
		t.Fatal(err)
	}
	defer ep.Progress().Stop()
	if err := ep.SetSerial(true); !errors.Is(err, ErrConfig) {
		t.Fatalf("SetSerial with a progress goroutine: %v, want ErrConfig", err)
	}
	if ep.serial {
		t.Fatal("endpoint serial after a refused SetSerial")
	}
}

// parkAtOnce makes waiters of endpoints created from now on park at their
// first empty poll, for 30 seconds unless woken, and returns the counter of
// parks.
func parkAtOnce(t *testing.T) *pvar.Var {
	testcvar.Set(t, "progress_spin", "0s")
	testcvar.Set(t, "progress_pause", "0s")
	testcvar.Set(t, "progress_park_max", "30s")
	parks, _ := pvar.Lookup("progress_parks")
	return parks
}

// TestParkedReceiverWoken: a receiver that has parked (no spinning, no
// pause phase, a 30-second nap) is woken by the sender's doorbell ring at
// the end of its Send or IsendNow, locked or serial, in both directions. A lost
// wake-up would hold the message for the whole nap.
func TestParkedReceiverWoken(t *testing.T) {
	parks := parkAtOnce(t)
	for _, serial := range []bool{false, true} {
		t.Run(fmt.Sprintf("serial=%v", serial), func(t *testing.T) {
			before := parks.Read()
			start := time.Now()
			run(t, 2, func(ep *Endpoint) error {
				if err := ep.SetSerial(serial); err != nil {
					return err
				}
				buf := make([]byte, 8)
				peer := 1 - ep.Rank()
				for i := range 4 {
					if (i+ep.Rank())%2 == 0 {
						time.Sleep(20 * time.Millisecond) // the peer parks meanwhile
						if i < 2 {
							if err := ep.Send(buf, peer, i, 0, Standard); err != nil {
								return err
							}
						} else if _, r, err := isendNow(ep, buf, peer, i, 0, Standard); r != nil || err != nil {
							return fmt.Errorf("IsendNow: %v, %v", r, err)
						}
					} else if _, err := ep.Recv(buf, peer, i, 0); err != nil {
						return err
					}
				}
				return nil
			})
			if el := time.Since(start); el > 10*time.Second {
				t.Fatalf("four exchanges took %v: a parked receiver was not woken", el)
			}
			if parks.Read() == before {
				t.Fatal("no receiver parked: the test did not test waking")
			}
		})
	}
}

// TestParkedSenderWokenByRoom: a sender whose packets wait for room on a
// full ring, and that has parked (no spinning, no pause phase, a 30-second
// nap), is woken by the receiver freeing the ring: nothing else would ring
// its doorbell, since the receiver sends it nothing. For both ring kinds,
// locked and serial. Before BeforePark and roomFreed the window below took
// the whole nap.
func TestParkedSenderWokenByRoom(t *testing.T) {
	skipOnNetwork(t, "a ring's reader waking its writer")
	parks := parkAtOnce(t)
	for _, kind := range []string{ringsRecords, ringsCells} {
		for _, serial := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/serial=%v", kind, serial), func(t *testing.T) {
				testcvar.Set(t, "engine_rings", kind)
				testcvar.Set(t, "engine_ring_bytes", "16384") // records: 64 KiB a window
				testcvar.Set(t, "engine_cells", "16")         // cells: a quarter of a window
				before, woken := parks.Read(), pvRoomWakes.Value()
				start := time.Now()
				run(t, 2, func(ep *Endpoint) error {
					if err := ep.SetSerial(serial); err != nil {
						return err
					}
					reqs := make([]*Request, 64)
					bufs := make([][]byte, len(reqs))
					var err error
					for round := range 2 {
						if ep.Rank() == 1 {
							time.Sleep(50 * time.Millisecond) // the sender fills the ring and parks
						}
						for i := range reqs {
							if ep.Rank() == 0 {
								reqs[i], err = ep.Isend(msg(1000, round*len(reqs)+i), 1, i, 0, Standard)
							} else {
								bufs[i] = make([]byte, 1000)
								reqs[i], err = ep.Irecv(bufs[i], 0, i, 0)
							}
							if err != nil {
								return err
							}
						}
						for i, r := range reqs {
							if _, err := r.Wait(); err != nil {
								return err
							}
							if ep.Rank() == 1 && !bytes.Equal(bufs[i], msg(1000, round*len(reqs)+i)) {
								return fmt.Errorf("round %d, message %d: wrong bytes", round, i)
							}
						}
					}
					return nil
				})
				if el := time.Since(start); el > 10*time.Second {
					t.Fatalf("two windows took %v: a sender parked waiting for room was not woken", el)
				}
				if parks.Read() == before || pvRoomWakes.Value() == woken {
					t.Fatal("no sender parked waiting for room: the test did not test waking")
				}
			})
		}
	}
}

// TestParkedWaiterWokenByCancel: a goroutine parked waiting on a receive
// is woken when another goroutine of the same rank cancels it: the
// completion rings the rank's own doorbell, with no packet involved.
func TestParkedWaiterWokenByCancel(t *testing.T) {
	parks := parkAtOnce(t)
	w, err := NewWorld(1)
	if err != nil {
		t.Fatal(err)
	}
	ep := w.Endpoint(0)
	defer ep.Close()
	r, err := ep.Irecv(make([]byte, 8), 0, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	before := parks.Read()
	done := make(chan Status)
	go func() {
		st, _ := r.Wait()
		done <- st
	}()
	time.Sleep(50 * time.Millisecond) // the waiter parks at its first empty poll
	start := time.Now()
	if err := r.Cancel(); err != nil {
		t.Fatal(err)
	}
	select {
	case st := <-done:
		if !st.Cancelled {
			t.Fatal("status not cancelled")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the parked waiter was not woken by the cancel")
	}
	t.Logf("woken %v after the cancel", time.Since(start))
	if parks.Read() == before {
		t.Fatal("the waiter never parked: the test did not test waking")
	}
}

// TestParkedProbeWoken: a Probe that has parked is woken by the message
// it waits for, from another rank (locked or serial) or from another
// goroutine of its own rank, whose send to itself queues the message
// without any packet.
func TestParkedProbeWoken(t *testing.T) {
	parks := parkAtOnce(t)
	check := func(t *testing.T, before int64, start time.Time) {
		t.Helper()
		if el := time.Since(start); el > 10*time.Second {
			t.Fatalf("took %v: a parked Probe was not woken", el)
		}
		if parks.Read() == before {
			t.Fatal("no Probe parked: the test did not test waking")
		}
	}
	for _, serial := range []bool{false, true} {
		t.Run(fmt.Sprintf("serial=%v", serial), func(t *testing.T) {
			before, start := parks.Read(), time.Now()
			run(t, 2, func(ep *Endpoint) error {
				if err := ep.SetSerial(serial); err != nil {
					return err
				}
				if ep.Rank() == 1 {
					time.Sleep(50 * time.Millisecond) // rank 0 parks meanwhile
					return ep.Send(make([]byte, 24), 0, 5, 0, Standard)
				}
				st, err := ep.Probe(1, 5, 0)
				if err != nil || st.Source != 1 || st.Tag != 5 || st.Count != 24 {
					return fmt.Errorf("probe: %+v %v", st, err)
				}
				_, err = ep.Recv(make([]byte, 24), 1, 5, 0)
				return err
			})
			check(t, before, start)
		})
	}
	t.Run("self", func(t *testing.T) {
		w, err := NewWorld(1)
		if err != nil {
			t.Fatal(err)
		}
		ep := w.Endpoint(0)
		defer ep.Close()
		before, start := parks.Read(), time.Now()
		done := make(chan error, 1)
		go func() {
			st, err := ep.Probe(AnySource, AnyTag, 0)
			if err == nil && (st.Source != 0 || st.Tag != 3 || st.Count != 8) {
				err = fmt.Errorf("status %+v", st)
			}
			done <- err
		}()
		time.Sleep(50 * time.Millisecond) // the prober parks meanwhile
		r, err := ep.Isend(make([]byte, 8), 0, 3, 0, Standard)
		if err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the parked Probe was not woken by the send to itself")
		}
		check(t, before, start)
		if _, err := ep.Recv(make([]byte, 8), 0, 3, 0); err != nil {
			t.Fatal(err)
		}
		if _, err := r.Wait(); err != nil {
			t.Fatal(err)
		}
	})
}

// TestShmParkedWoken: a rank process parked in a receive (no spinning, a
// 30-second nap) is woken by a sender in another process, whether the
// sleeper issues the membarrier(2) barrier that lets wakers skip their
// fence or, with progress_membarrier off, tells them to fence instead.
func TestShmParkedWoken(t *testing.T) {
	for _, mb := range []string{"true", "false"} {
		t.Run("membarrier="+mb, func(t *testing.T) {
			ep, kids := startJob(t, 2, "echo", "TACHYON_PROGRESS_SPIN=0s", "TACHYON_PROGRESS_PAUSE=0s",
				"TACHYON_PROGRESS_PARK_MAX=30s", "TACHYON_PROGRESS_MEMBARRIER="+mb)
			start := time.Now()
			buf := make([]byte, 8)
			for i := range 3 {
				time.Sleep(20 * time.Millisecond) // the echo rank parks meanwhile
				if err := ep.Send(buf, 1, i, 0, Standard); err != nil {
					t.Fatal(err)
				}
				if _, err := ep.Recv(buf, 1, i, 0); err != nil {
					t.Fatal(err)
				}
			}
			if el := time.Since(start); el > 10*time.Second {
				t.Fatalf("three exchanges took %v: a parked rank was not woken", el)
			}
			if err := ep.Send(nil, 1, 999, 0, Standard); err != nil {
				t.Fatal(err)
			}
			if err := kids[0].Wait(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestCollect: Collect gives back, as WaitErr would, only a request that
// completed without error on a serial endpoint, and leaves any other as
// it was for WaitErr.
func TestCollect(t *testing.T) {
	run(t, 2, func(ep *Endpoint) error {
		peer := 1 - ep.Rank()
		if ep.Rank() == 1 { // not serial: Collect never takes its requests
			if _, err := ep.Recv(nil, peer, 98, 0); err != nil {
				return err
			}
			for tag := 1; tag <= 2; tag++ {
				r, err := ep.Isend(msg(8, tag), peer, tag, 0, Standard)
				if err != nil {
					return err
				}
				for !r.Done() {
					ep.Progress().Progress()
				}
				if r.Collect() {
					return errors.New("Collect took a request of an endpoint that is not serial")
				}
				if err := r.WaitErr(); err != nil {
					return err
				}
			}
			return nil
		}
		if err := ep.SetSerial(true); err != nil {
			return err
		}
		whole, short := make([]byte, 8), make([]byte, 4)
		r1, err := ep.Irecv(whole, peer, 1, 0)
		if err != nil {
			return err
		}
		r2, err := ep.Irecv(short, peer, 2, 0) // truncated
		if err != nil {
			return err
		}
		if r1.Collect() || r2.Collect() {
			return errors.New("Collect took a receive before its message was sent")
		}
		if err := ep.Send(nil, peer, 98, 0, Standard); err != nil {
			return err
		}
		id := r1.id
		deadline := time.Now().Add(10 * time.Second)
		for !r1.Collect() {
			if time.Now().After(deadline) {
				return errors.New("Collect never took the completed receive")
			}
			ep.Progress().Progress()
		}
		if !bytes.Equal(whole, msg(8, 1)) {
			return fmt.Errorf("received %x", whole)
		}
		if r1.state != stFree || r1.id != id+1<<32 || r1.buf != nil {
			return fmt.Errorf("after Collect: state %d, id %#x (was %#x), buf %v: not back in the pool", r1.state, r1.id, id, r1.buf)
		}
		for !r2.Done() {
			ep.Progress().Progress()
		}
		if r2.Collect() {
			return errors.New("Collect took a receive that failed")
		}
		if err := r2.WaitErr(); !errors.Is(err, ErrTruncate) {
			return fmt.Errorf("the truncated receive's WaitErr: %v, want ErrTruncate", err)
		}
		r3, err := ep.Irecv(whole, peer, 3, 0)
		if err != nil {
			return err
		}
		if r3 != r2 {
			return errors.New("the request given back last is not the next taken")
		}
		r3.Free()
		return nil
	})
}

// TestFreedReceiveCompletes: a receive freed while posted (MPI_REQUEST_FREE)
// goes back to the pool once a window's short message reaches it, on a
// serial endpoint, whether its message comes in line (pollShort) or not;
// a request left out would be lost to the pool.
func TestFreedReceiveCompletes(t *testing.T) {
	run(t, 2, func(ep *Endpoint) error {
		peer := 1 - ep.Rank()
		if ep.Rank() == 1 {
			if _, err := ep.Recv(nil, peer, 98, 0); err != nil {
				return err
			}
			for i := range 3 {
				if err := ep.Send(msg(8, i), peer, 1, 0, Standard); err != nil {
					return err
				}
			}
			return nil
		}
		if err := ep.SetSerial(true); err != nil {
			return err
		}
		bufs := [][]byte{make([]byte, 8), make([]byte, 8), make([]byte, 8)}
		var reqs []*Request
		for _, b := range bufs {
			r, err := ep.Irecv(b, peer, 1, 0)
			if err != nil {
				return err
			}
			reqs = append(reqs, r)
		}
		freed := reqs[0]
		freed.Free()
		if err := ep.Send(nil, peer, 98, 0, Standard); err != nil {
			return err
		}
		for _, r := range reqs[1:] {
			if _, err := r.Wait(); err != nil {
				return err
			}
		}
		if freed.state != stFree {
			return fmt.Errorf("a freed receive whose message came is in state %d, not back in the pool", freed.state)
		}
		for i, b := range bufs {
			if !bytes.Equal(b, msg(8, i)) {
				return fmt.Errorf("buffer %d holds %x", i, b)
			}
		}
		return nil
	})
}

// TestParkedWaiterWokenByProgressGoroutine: on an endpoint a dedicated
// progress goroutine polls (so not serial), a goroutine parked on one of
// the receives of a window (no spinning, no pause phase, a 30-second nap)
// is woken when that goroutine completes it. The serial endpoint's
// short-packet loop (pollShort) completes requests without a wake-up,
// which only a serial endpoint may: run here, the waiter would sleep until
// some later ring, and the sender sends the next message only once the
// waiter has its own. A second poller keeps the progress goroutine busy 2
// ms a poll, so that the waiter, woken by the sender's ring, has looked at
// its request and parked again before the poll that completes it.
func TestParkedWaiterWokenByProgressGoroutine(t *testing.T) {
	parks := parkAtOnce(t)
	before := parks.Read()
	start := time.Now()
	const n = 4
	run(t, 2, func(ep *Endpoint) error {
		peer := 1 - ep.Rank()
		if ep.Rank() == 0 {
			if _, err := ep.Recv(nil, peer, 98, 0); err != nil {
				return err
			}
			for i := range n {
				time.Sleep(5 * time.Millisecond) // the receiver's waiters park meanwhile
				if err := ep.Send(msg(8, i), peer, 1, 0, Standard); err != nil {
					return err
				}
				if _, err := ep.Recv(nil, peer, 99, 0); err != nil {
					return err
				}
			}
			return nil
		}
		defer ep.Progress().Register(busyPoller{})()
		if err := ep.Progress().Start(-1); err != nil {
			return err
		}
		defer ep.Progress().Stop()
		bufs := make([][]byte, n)
		reqs := make([]*Request, n)
		for i := range reqs {
			bufs[i] = make([]byte, 8)
			var err error
			if reqs[i], err = ep.Irecv(bufs[i], peer, 1, 0); err != nil {
				return err
			}
		}
		// Each request has a goroutine of its own parked on it.
		errs := make(chan error, n)
		for i, r := range reqs {
			go func() {
				if _, err := r.Wait(); err != nil {
					errs <- err
				} else if !bytes.Equal(bufs[i], msg(8, i)) {
					errs <- fmt.Errorf("receive %d holds %x", i, bufs[i])
				} else {
					errs <- nil
				}
			}()
		}
		if err := ep.Send(nil, peer, 98, 0, Standard); err != nil {
			return err
		}
		for range n {
			if err := <-errs; err != nil {
				return err
			}
			if err := ep.Send(nil, peer, 99, 0, Standard); err != nil {
				return err
			}
		}
		return nil
	})
	if el := time.Since(start); el > 10*time.Second {
		t.Fatalf("a window of %d receives took %v: a parked waiter was not woken", n, el)
	}
	if parks.Read() == before {
		t.Fatal("no goroutine parked: the test did not test waking")
	}
}

// busyPoller is a progress.Poller that always finds work, 2 ms of it.
type busyPoller struct{}

func (busyPoller) Poll() int {
	time.Sleep(2 * time.Millisecond)
	return 1
}

// waitAll waits for each of reqs in turn.
func waitAll(reqs []*Request) error {
	for _, r := range reqs {
		if _, err := r.Wait(); err != nil {
			return err
		}
	}
	return nil
}

// shortRecv and shortSend describe one receive posted and one message
// sent in a TestShortPathCases case.
type shortRecv struct {
	src, tag int
	ctx      uint32
	size     int
}

type shortSend struct {
	from, tag int
	ctx       uint32
	size      int
	mode      Mode
}

// TestShortPathCases: a serial receiver with its receives posted, whose
// first poll finds each sender's messages all in its ring, delivers them
// as matching says, whichever path takes them. The cases are those where
// a window's short-packet loop (pollShort) must leave a packet to the
// general path: payloads over 16 bytes, a buffer too small, keys
// (tag, context, source) other than the one last looked up, a wildcard
// receive posted between, packets other than short ones (synchronous
// sends), a receive list down to its last receive and past it. Messages
// no receive was posted for are received afterwards, in order.
func TestShortPathCases(t *testing.T) {
	cases := []struct {
		name  string
		ranks int
		recvs []shortRecv
		sends []shortSend
	}{
		{name: "sizes", ranks: 2},
		{name: "truncated", ranks: 2},
		{name: "tags", ranks: 2},
		{name: "contexts", ranks: 2},
		{name: "wildcard", ranks: 2},
		{name: "synchronous", ranks: 2},
		{name: "exhausted", ranks: 2},
		{name: "sources", ranks: 3},
	}
	for i := range cases {
		c := &cases[i]
		switch c.name {
		case "sizes": // 0 to 20 bytes, the same key
			for n := 0; n <= 20; n++ {
				c.recvs = append(c.recvs, shortRecv{1, 1, 0, 20})
				c.sends = append(c.sends, shortSend{1, 1, 0, n, Standard})
			}
		case "truncated": // 12 bytes into 8, 16 into 12
			for n := 0; n < 6; n++ {
				c.recvs = append(c.recvs, shortRecv{1, 1, 0, 8 + 4*(n%2)})
				c.sends = append(c.sends, shortSend{1, 1, 0, 12 + 4*(n%2), Standard})
			}
		case "tags", "contexts": // two keys interleaved
			for n := 0; n < 12; n++ {
				tag, ctx := 1, uint32(0)
				if c.name == "tags" {
					tag += n % 2
				} else {
					ctx += uint32(n % 2)
				}
				c.recvs = append(c.recvs, shortRecv{1, tag, ctx, 16})
				c.sends = append(c.sends, shortSend{1, tag, ctx, 8, Standard})
			}
		case "wildcard": // an AnyTag receive posted between those of tag 1
			c.recvs = []shortRecv{{1, 1, 0, 16}, {1, AnyTag, 0, 16}, {1, 1, 0, 16}, {1, 1, 0, 16}, {AnySource, 1, 0, 16}, {1, 1, 0, 16}, {1, 1, 0, 16}}
			for range c.recvs {
				c.sends = append(c.sends, shortSend{1, 1, 0, 8, Standard})
			}
		case "synchronous": // short and synchronous sends interleaved (eager packets, the same key at the same offsets)
			for n := 0; n < 9; n++ {
				mode := Standard
				if n%3 == 1 {
					mode = Synchronous
				}
				c.recvs = append(c.recvs, shortRecv{1, 1, 0, 16})
				c.sends = append(c.sends, shortSend{1, 1, 0, 8, mode})
			}
		case "exhausted": // more messages than receives: the key's list empties
			c.recvs = []shortRecv{{1, 1, 0, 16}, {1, 1, 0, 16}}
			for range 5 {
				c.sends = append(c.sends, shortSend{1, 1, 0, 8, Standard})
			}
		case "sources": // the same tag from two senders
			for n := 0; n < 12; n++ {
				src := 1 + n%2
				c.recvs = append(c.recvs, shortRecv{src, 1, 0, 16})
			}
			for n := 0; n < 12; n++ {
				c.sends = append(c.sends, shortSend{1 + n/6, 1, 0, 8 + n%6, Standard})
			}
		}
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// What matching says: each sender's messages in order, each
			// to the receive posted first that it matches.
			want := make([]int, len(c.recvs)) // the message each receive gets
			taken := make([]bool, len(c.recvs))
			var late []int // messages that find no receive
			for m, s := range c.sends {
				matched := false
				for i, r := range c.recvs {
					if !taken[i] && (r.src == s.from || r.src == AnySource) && (r.tag == s.tag || r.tag == AnyTag) && r.ctx == s.ctx {
						taken[i], want[i], matched = true, m, true
						break
					}
				}
				if !matched {
					late = append(late, m)
				}
			}
			run(t, c.ranks, func(ep *Endpoint) error {
				if err := ep.SetSerial(true); err != nil {
					return err
				}
				if ep.Rank() != 0 {
					if _, err := ep.Recv(nil, 0, 900, 0); err != nil {
						return err
					}
					var reqs []*Request
					for m, s := range c.sends {
						if s.from == ep.Rank() {
							r, err := ep.Isend(msg(s.size, m), 0, s.tag, s.ctx, s.mode)
							if err != nil {
								return err
							}
							reqs = append(reqs, r)
						}
					}
					return waitAll(reqs)
				}
				bufs := make([][]byte, len(c.recvs))
				reqs := make([]*Request, len(c.recvs))
				for i, r := range c.recvs {
					bufs[i] = bytes.Repeat([]byte{0xee}, r.size) // 0xee: not the ring's padding
					var err error
					if reqs[i], err = ep.Irecv(bufs[i], r.src, r.tag, r.ctx); err != nil {
						return err
					}
				}
				for s := 1; s < c.ranks; s++ {
					if err := ep.Send(nil, s, 900, 0, Standard); err != nil {
						return err
					}
				}
				time.Sleep(20 * time.Millisecond) // every message in the rings before the first poll
				for i, r := range reqs {
					st, err := r.Wait()
					s := c.sends[want[i]]
					n := min(s.size, c.recvs[i].size)
					if s.size > c.recvs[i].size {
						if !errors.Is(err, ErrTruncate) {
							return fmt.Errorf("receive %d: %v, want ErrTruncate", i, err)
						}
					} else if err != nil {
						return fmt.Errorf("receive %d: %v", i, err)
					}
					if st.Source != s.from || st.Tag != s.tag || st.Count != n {
						return fmt.Errorf("receive %d: status %+v, want message %d (source %d, tag %d, %d bytes)", i, st, want[i], s.from, s.tag, n)
					}
					if !bytes.Equal(bufs[i][:n], msg(s.size, want[i])[:n]) {
						return fmt.Errorf("receive %d holds %x, want message %d's %x", i, bufs[i][:n], want[i], msg(s.size, want[i])[:n])
					}
					if rest := bufs[i][n:]; !bytes.Equal(rest, bytes.Repeat([]byte{0xee}, len(rest))) {
						return fmt.Errorf("receive %d of %d bytes wrote %x past them", i, n, rest)
					}
				}
				for _, m := range late {
					s := c.sends[m]
					buf := make([]byte, s.size)
					st, err := ep.Recv(buf, s.from, s.tag, s.ctx)
					if err != nil || st.Count != s.size || !bytes.Equal(buf, msg(s.size, m)) {
						return fmt.Errorf("message %d, received late: %v, %+v, %x", m, err, st, buf)
					}
				}
				if err := countsSettled(ep); err != nil {
					return err
				}
				return poolZeroed(ep)
			})
		})
	}
}

// countsSettled checks that ep, with nothing left in flight, counts no
// posted and no pending receive, whichever path (pollShort, which counts
// a run of them at its end, or another) completed them.
func countsSettled(ep *Endpoint) error {
	ep.lock()
	defer ep.unlock()
	if ep.m.nposted != 0 || ep.inflight != 0 || ep.posted.Load() != 0 {
		return fmt.Errorf("with nothing in flight, %d receives counted posted (level %d), %d requests pending", ep.m.nposted, ep.posted.Load(), ep.inflight)
	}
	return nil
}

// poolZeroed checks that every request in ep's pool keeps nothing of its
// last operation, whichever path (pollShort, shortToPosted, the general
// one) completed it.
func poolZeroed(ep *Endpoint) error {
	ep.lock()
	defer ep.unlock()
	n := 0
	for r := ep.reqs.free; r != nil; r = r.nextFree {
		if v := reflect.ValueOf(r.reqOp); !v.IsZero() {
			for i := range v.NumField() {
				for j := range v.Field(i).NumField() {
					if f := v.Field(i).Field(j); !f.IsZero() {
						return fmt.Errorf("a request in the pool keeps %s = %v", v.Field(i).Type().Field(j).Name, f)
					}
				}
			}
		}
		n++
	}
	if n == 0 {
		return errors.New("no request in the pool")
	}
	return nil
}

// TestCopyShort: copyShort copies a payload of every short length, and
// longer ones, whole into a buffer with room for it, writing nothing past
// it, by whichever of its moves the length takes.
func TestCopyShort(t *testing.T) {
	for n := 0; n <= 24; n++ {
		for room := n; room <= n+9; room++ {
			src := msg(n, n)
			dst := bytes.Repeat([]byte{0xee}, room)
			if got := copyShort(dst, src); got != n {
				t.Fatalf("%d bytes into %d: copyShort returned %d", n, room, got)
			}
			if !bytes.Equal(dst[:n], src) {
				t.Fatalf("%d bytes into %d: got %x, want %x", n, room, dst[:n], src)
			}
			if rest := dst[n:]; !bytes.Equal(rest, bytes.Repeat([]byte{0xee}, len(rest))) {
				t.Fatalf("%d bytes into %d: wrote %x past them", n, room, rest)
			}
		}
	}
}
