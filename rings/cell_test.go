package rings

import (
	"errors"
	"runtime"
	"sync"
	"testing"
)

func newCellPair(t testing.TB, cells, cellSize int) (*CellRing, *CellProducer, *CellConsumer) {
	t.Helper()
	r, err := NewCellRing(AlignedBytes(CellRingSize(cells, cellSize)), cells, cellSize)
	if err != nil {
		t.Fatal(err)
	}
	p, err := r.Producer()
	if err != nil {
		t.Fatal(err)
	}
	c, err := r.Consumer()
	if err != nil {
		t.Fatal(err)
	}
	return r, p, c
}

func TestCellSendRecv(t *testing.T) {
	r, p, c := newCellPair(t, 8, 64)
	if r.MaxPayload() != 56 || r.Cells() != 8 {
		t.Fatalf("MaxPayload %d Cells %d", r.MaxPayload(), r.Cells())
	}
	buf := make([]byte, 64)
	if _, err := c.TryRecv(buf); err != ErrEmpty {
		t.Fatalf("empty ring: %v", err)
	}
	// Several laps, filling the ring each time.
	seq := uint64(0)
	for lap := 0; lap < 5; lap++ {
		for i := 0; i < 8; i++ {
			m := buf[:i*7]
			pattern(m, seq+uint64(i))
			if err := p.TrySend(m); err != nil {
				t.Fatalf("lap %d send %d: %v", lap, i, err)
			}
		}
		if err := p.TrySend([]byte{1}); err != ErrFull {
			t.Fatalf("full ring: %v", err)
		}
		if r.Len() != 8 {
			t.Fatalf("Len %d", r.Len())
		}
		for i := 0; i < 8; i++ {
			n, err := c.TryRecv(buf)
			if err != nil || n != i*7 || !checkPattern(buf[:n], seq+uint64(i)) {
				t.Fatalf("lap %d recv %d: n=%d err=%v", lap, i, n, err)
			}
		}
		seq += 8
	}
	if err := p.TrySend(make([]byte, 57)); err != ErrTooLarge {
		t.Fatalf("57 bytes: %v", err)
	}
	if err := p.TrySend(make([]byte, 56)); err != nil {
		t.Fatal(err)
	}
	if n, err := c.TryRecv(buf[:10]); err != ErrShortBuffer || n != 56 {
		t.Fatalf("short buffer: %d %v", n, err)
	}
	if n, err := c.TryRecv(buf); err != nil || n != 56 {
		t.Fatalf("after short buffer: %d %v", n, err)
	}
}

func TestCellBatch(t *testing.T) {
	_, p, c := newCellPair(t, 16, 128)
	if k := p.Claim(100); k != 16 {
		t.Fatalf("Claim(100) = %d, want 16", k)
	}
	if p.Slot(16) != nil || p.Commit(16, 1) != ErrInvalid || p.Commit(0, 121) != ErrTooLarge {
		t.Fatal("out-of-claim access accepted")
	}
	if err := p.TrySend([]byte{1}); err != ErrInvalid {
		t.Fatalf("TrySend during a claim: %v", err)
	}
	for i := 0; i < 16; i++ {
		s := p.Slot(i)
		if len(s) != 120 {
			t.Fatalf("slot %d len %d", i, len(s))
		}
		pattern(s[:i+8], uint64(i))
		p.Commit(i, i+8)
	}
	if k, _ := c.Peek(10); k != 0 {
		t.Fatalf("peeked %d unpublished cells", k)
	}
	p.Publish(10) // the last 6 cells are given back
	k, err := c.Peek(100)
	if err != nil || k != 10 {
		t.Fatalf("Peek = %d, %v", k, err)
	}
	for i := 0; i < k; i++ {
		if m := c.Message(i); !checkPattern(m, uint64(i)) || len(m) != i+8 {
			t.Fatalf("message %d: %v", i, m)
		}
	}
	if c.Message(k) != nil {
		t.Fatal("message beyond the peek")
	}
	c.Release(4)
	if k, _ := c.Peek(100); k != 6 {
		t.Fatalf("after Release(4): Peek = %d", k)
	}
	if m := c.Message(0); !checkPattern(m, 4) {
		t.Fatalf("first after release: %v", m)
	}
	c.Release(6)
	if k := p.Claim(16); k != 16 {
		t.Fatalf("Claim after drain = %d", k)
	}
	p.Publish(0)
}

func TestCellClose(t *testing.T) {
	r, p, c := newCellPair(t, 4, 64)
	p.TrySend([]byte("last"))
	p.Close()
	if err := p.TrySend([]byte("x")); err != ErrClosed {
		t.Fatalf("send after close: %v", err)
	}
	if _, err := r.Producer(); err != ErrClosed {
		t.Fatalf("reattach closed producer: %v", err)
	}
	buf := make([]byte, 64)
	if n, err := c.Recv(buf); err != nil || string(buf[:n]) != "last" {
		t.Fatalf("drain: %q %v", buf[:n], err)
	}
	if _, err := c.TryRecv(buf); err != ErrClosed {
		t.Fatalf("after drain: %v", err)
	}
	if _, err := c.Recv(buf); err != ErrClosed {
		t.Fatalf("Recv after drain: %v", err)
	}
	if _, err := r.Consumer(); err != ErrBusy {
		t.Fatalf("second consumer: %v", err)
	}
	c.Close()
	if err := p.Check(); err != ErrClosed {
		t.Fatalf("producer check after consumer close: %v", err)
	}
}

func TestCellConsumerClosedUnblocksSend(t *testing.T) {
	_, p, c := newCellPair(t, 2, 64)
	p.TrySend(nil)
	p.TrySend(nil)
	c.Close()
	if err := p.Send([]byte("x")); err != ErrClosed {
		t.Fatalf("Send to closed consumer: %v", err)
	}
}

func TestCellDeadPeer(t *testing.T) {
	r, p, c := newCellPair(t, 2, 64)
	dead := deadPID(t)
	before := pvDead.Value()
	fakeSlot(r.h, offConsumerSlot, dead)
	fakeSlot(r.h, offProducerSlot, dead)
	if err := p.Check(); !errors.Is(err, ErrPeerDead) {
		t.Fatalf("producer check: %v", err)
	}
	p.TrySend([]byte("a"))
	p.TrySend([]byte("b"))
	if err := p.Send([]byte("c")); !errors.Is(err, ErrPeerDead) {
		t.Fatalf("Send to dead consumer: %v", err)
	}
	buf := make([]byte, 64)
	for _, want := range []string{"a", "b"} { // published data still arrives
		if n, err := c.Recv(buf); err != nil || string(buf[:n]) != want {
			t.Fatalf("Recv: %q %v", buf[:n], err)
		}
	}
	if _, err := c.Recv(buf); !errors.Is(err, ErrPeerDead) {
		t.Fatalf("Recv from dead producer: %v", err)
	}
	if got := pvDead.Value() - before; got != 2 {
		t.Fatalf("rings_dead_peers rose by %d, want 2", got)
	}
	// A new producer cannot take the dead one's place.
	if _, err := r.Producer(); !errors.Is(err, ErrPeerDead) {
		t.Fatalf("attach over dead producer: %v", err)
	}
}

func TestCellMalformedLength(t *testing.T) {
	_, p, c := newCellPair(t, 4, 64)
	p.TrySend([]byte("ok"))
	p.TrySend([]byte("bad"))
	p.TrySend([]byte("ok2"))
	// The peer scribbles an impossible length into the second cell.
	hw := (*uint64)(c.cell(1))
	*hw = *hw&^0xffffffff | 1000
	before := pvMalformed.Value()
	buf := make([]byte, 64)
	if n, err := c.TryRecv(buf); err != nil || string(buf[:n]) != "ok" {
		t.Fatalf("first: %q %v", buf[:n], err)
	}
	if k, err := c.Peek(4); k != 0 || err != ErrCorrupt {
		t.Fatalf("Peek at malformed cell: %d %v", k, err)
	}
	if n, err := c.TryRecv(buf); err != nil || string(buf[:n]) != "ok2" {
		t.Fatalf("after drop: %q %v", buf[:n], err)
	}
	if pvMalformed.Value()-before != 1 {
		t.Fatal("malformed cell not counted")
	}
}

func TestCellAttach(t *testing.T) {
	mem := AlignedBytes(CellRingSize(16, 64))
	if _, err := NewCellRing(mem, 15, 64); !errors.Is(err, ErrInvalid) {
		t.Fatalf("15 cells: %v", err)
	}
	if _, err := NewCellRing(mem, 16, 96); !errors.Is(err, ErrInvalid) {
		t.Fatalf("96-byte cells: %v", err)
	}
	if _, err := NewCellRing(mem[:100], 16, 64); !errors.Is(err, ErrInvalid) {
		t.Fatalf("short memory: %v", err)
	}
	if _, err := NewCellRing(mem[8:], 4, 64); !errors.Is(err, ErrInvalid) {
		t.Fatalf("misaligned memory: %v", err)
	}
	if _, err := AttachCellRing(mem); !errors.Is(err, ErrBadSegment) {
		t.Fatalf("attach before init: %v", err)
	}
	if _, err := NewCellRing(mem, 16, 64); err != nil {
		t.Fatal(err)
	}
	if _, err := AttachCellRing(mem); err != nil {
		t.Fatal(err)
	}
	if _, err := AttachCellRing(mem[:CellRingSize(16, 64)-1]); !errors.Is(err, ErrBadSegment) {
		t.Fatalf("attach short: %v", err)
	}
	if _, err := AttachRecordRing(mem); !errors.Is(err, ErrBadSegment) {
		t.Fatalf("cell ring attached as record ring: %v", err)
	}
	*word64(unsafeBase(mem), offCapacity) = 1 << 40
	if _, err := AttachCellRing(mem); !errors.Is(err, ErrBadSegment) {
		t.Fatalf("huge capacity: %v", err)
	}
}

// TestCellGoroutines passes messages between goroutines across many laps;
// under -race it checks the fallback stores and loads order the payload.
func TestCellGoroutines(t *testing.T) {
	n := 200000
	if raceEnabled || testing.Short() {
		n = 20000
	}
	_, p, c := newCellPair(t, 64, 64)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		buf := make([]byte, 56)
		for i := 0; i < n; i++ {
			m := buf[:i%57]
			pattern(m, uint64(i))
			if i%3 == 0 {
				if p.Claim(1) != 1 {
					for p.Claim(1) != 1 {
						runtime.Gosched()
					}
				}
				copy(p.Slot(0), m)
				p.Commit(0, len(m))
				p.Publish(1)
				continue
			}
			if err := p.Send(m); err != nil {
				t.Error(err)
				return
			}
		}
		p.Close()
	}()
	buf := make([]byte, 56)
	for i := 0; i < n; {
		if i%2 == 0 {
			k, err := c.Peek(8)
			if err != nil {
				t.Fatal(err)
			}
			if k == 0 {
				runtime.Gosched()
				continue
			}
			for j := 0; j < k; j++ {
				m := c.Message(j)
				if len(m) != (i+j)%57 || !checkPattern(m, uint64(i+j)) {
					t.Fatalf("message %d: %v", i+j, m)
				}
			}
			c.Release(k)
			i += k
			continue
		}
		k, err := c.Recv(buf)
		if err != nil || k != i%57 || !checkPattern(buf[:k], uint64(i)) {
			t.Fatalf("message %d: %v %v", i, buf[:k], err)
		}
		i++
	}
	if _, err := c.Recv(buf); err != ErrClosed {
		t.Fatalf("after the last: %v", err)
	}
	wg.Wait()
}

// TestCellRoomWanted: RoomWanted of cells reports each WantRoom once.
func TestCellRoomWanted(t *testing.T) {
	_, p, c := newCellPair(t, 4, 64)
	for range 4 {
		if err := p.TrySend([]byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	if c.RoomWanted() {
		t.Fatal("RoomWanted before WantRoom")
	}
	p.WantRoom()
	if _, err := c.TryRecv(make([]byte, 64)); err != nil {
		t.Fatal(err)
	}
	if !c.RoomWanted() || c.RoomWanted() {
		t.Fatal("one WantRoom: want true, then false")
	}
}
