package engine

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/tachyon-hpc/tachyon/internal/testcvar"
)

// splitter stands in for the shared-memory reader between goroutine
// ranks: it splits every rendezvous message in the middle and copies by
// address within the process, failing the calls a test picks.
type splitter struct {
	mu   sync.Mutex
	bufs [][]byte // the buffers an address may point into

	failReads, failWrites uint64 // bit k: the k-th call fails
	reads, writes         atomic.Int32
}

var errInjected = errors.New("injected failure")

func (s *splitter) add(b []byte) []byte {
	s.mu.Lock()
	s.bufs = append(s.bufs, b)
	s.mu.Unlock()
	return b
}

// at returns the n bytes at addr in one of the buffers.
func (s *splitter) at(addr uint64, n int) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, b := range s.bufs {
		base := uint64(uintptr(unsafe.Pointer(unsafe.SliceData(b))))
		if addr >= base && addr+uint64(n) <= base+uint64(len(b)) {
			return b[addr-base:][:n], nil
		}
	}
	return nil, fmt.Errorf("no buffer holds %d bytes at %#x", n, addr)
}

// readRemote refuses, as the shared-memory reader does below
// engine_cma_min: a message not split streams.
func (s *splitter) readRemote(int, uint64, uint64, []byte) error { return errCMASmall }

func (s *splitter) splitAt(_, n int) int { return n / 2 &^ 63 }

func (s *splitter) readPart(_ int, addr uint64, dst []byte) error {
	return s.move(&s.reads, s.failReads, addr, dst, false)
}

func (s *splitter) writeRemote(_ int, addr uint64, src []byte) error {
	return s.move(&s.writes, s.failWrites, addr, src, true)
}

// move copies b to or from addr, unless fails picks this call.
func (s *splitter) move(calls *atomic.Int32, fails uint64, addr uint64, b []byte, toAddr bool) error {
	if k := calls.Add(1) - 1; fails&(1<<k) != 0 {
		return errInjected
	}
	there, err := s.at(addr, len(b))
	if err != nil {
		return err
	}
	if toAddr {
		copy(there, b)
	} else {
		copy(b, there)
	}
	return nil
}

// splitWorld makes two goroutine ranks that copy rendezvous messages
// with s.
func splitWorld(t *testing.T, s *splitter) *World {
	skipOnNetwork(t, "cross-memory copies to split")
	w, err := NewWorld(2)
	if err != nil {
		t.Fatal(err)
	}
	w.eps[0].reader, w.eps[1].reader = s, s
	return w
}

// oneMessage sends out from rank 1 into rank 0's in and returns the
// receive's status and error, and the send's error.
func oneMessage(w *World, out, in []byte, tag int) (st Status, err, serr error) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		serr = w.Endpoint(1).Send(out, 0, tag, 0, Standard)
	}()
	st, err = w.Endpoint(0).Recv(in, 1, tag, 0)
	<-done
	return st, err, serr
}

// TestSplitRendezvous checks the split copy and each way it falls back:
// every message arrives whole, and the counters say how it moved.
func TestSplitRendezvous(t *testing.T) {
	testcvar.Set(t, "engine_rndv_split_lone", "true")
	cases := []struct {
		name                  string
		failReads, failWrites uint64
		split, piped          uint64 // messages the receiver counts each way
	}{
		{"both", 0, 0, 1, 0},
		{"write fails", 0, 1, 1, 0},     // the receiver reads the sender's part too
		{"read fails", 1, 0, 0, 1},      // streamed; the sender's write is ignored
		{"both fail", 1 << 1, 1, 0, 1},  // the first read worked, the second not: streamed
		{"all fail", 1 | 1<<1, 1, 0, 1}, // nothing copied across
	}
	for _, c := range cases {
		for _, size := range []int{16<<10 + 1, 1 << 20, 300001} {
			for _, room := range []int{size, size - 5000} { // whole, and truncated
				t.Run(fmt.Sprintf("%s/%d/%d", c.name, size, room), func(t *testing.T) {
					s := &splitter{failReads: c.failReads, failWrites: c.failWrites}
					w := splitWorld(t, s)
					out := s.add(msg(size, room))
					in := s.add(make([]byte, room))
					split0, piped0 := pvSplit.Value(), pvPipelined.Value()
					st, err, serr := oneMessage(w, out, in, 7)
					w.Endpoint(0).Close()
					w.Endpoint(1).Close()
					if serr != nil {
						t.Fatal("send:", serr)
					}
					if room < size {
						if !errors.Is(err, ErrTruncate) {
							t.Fatalf("truncated receive: %v", err)
						}
					} else if err != nil {
						t.Fatal(err)
					}
					if st.Count != room || !bytes.Equal(in, out[:room]) {
						t.Fatalf("received %d bytes, want %d; equal %v", st.Count, room, bytes.Equal(in, out[:room]))
					}
					if d, p := pvSplit.Value()-split0, pvPipelined.Value()-piped0; d != c.split || p != c.piped {
						t.Fatalf("split %d, streamed %d; want %d, %d", d, p, c.split, c.piped)
					}
				})
			}
		}
	}
}

// TestSplitQueued checks that, with engine_rndv_split_lone off, a lone
// rendezvous message is not split and one that comes while an earlier one from
// the same rank is still arriving is split.
func TestSplitQueued(t *testing.T) {
	s := new(splitter)
	w := splitWorld(t, s)
	const n, size = 8, 1 << 20
	outs, ins := make([][]byte, n), make([][]byte, n)
	for i := range outs {
		outs[i], ins[i] = s.add(msg(size, i)), s.add(make([]byte, size))
	}
	split0, piped0 := pvSplit.Value(), pvPipelined.Value()
	// The lone message first.
	if _, err, serr := oneMessage(w, outs[0], ins[0], 0); err != nil || serr != nil {
		t.Fatal(err, serr)
	}
	if d, p := pvSplit.Value()-split0, pvPipelined.Value()-piped0; d != 0 || p != 1 {
		t.Fatalf("lone message: split %d, streamed %d", d, p)
	}
	// Then a window: all posted before the first rts is seen.
	reqs := make([]*Request, 0, 2*n)
	for i := 1; i < n; i++ {
		r, err := w.Endpoint(0).Irecv(ins[i], 1, i, 0)
		if err != nil {
			t.Fatal(err)
		}
		reqs = append(reqs, r)
	}
	var wg sync.WaitGroup
	var serr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		var sends []*Request
		for i := 1; i < n; i++ {
			r, err := w.Endpoint(1).Isend(outs[i], 0, i, 0, Standard)
			if err != nil {
				serr = err
				return
			}
			sends = append(sends, r)
		}
		for _, r := range sends {
			if _, err := r.Wait(); err != nil {
				serr = err
			}
		}
	}()
	for _, r := range reqs {
		if _, err := r.Wait(); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	w.Endpoint(0).Close()
	w.Endpoint(1).Close()
	if serr != nil {
		t.Fatal(serr)
	}
	for i := range ins {
		if !bytes.Equal(ins[i], outs[i]) {
			t.Fatalf("message %d differs", i)
		}
	}
	// The window's first message comes after the lone one has arrived;
	// at least the second comes while the first is still arriving.
	d, p := pvSplit.Value()-split0, pvPipelined.Value()-piped0
	if d+p != n || d < 1 || d > n-2 {
		t.Fatalf("window of %d: split %d, streamed %d", n-1, d, p-1)
	}
	t.Logf("window of %d: split %d, streamed %d", n-1, d, p-1)
}
