package rings

import (
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/tachyon-hpc/tachyon/internal/testcvar"
	"github.com/tachyon-hpc/tachyon/internal/testrole"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// The stress tests run producers in child processes and check, in the
// parent, that every message arrives exactly once, intact and in order,
// across many wraps of a small ring.

func TestProcessCellStress(t *testing.T) {
	n := stressCount(4_000_000)
	s := newTestSegment(t, SegmentSize(CellRingSize(256, 64)))
	i, r, err := s.NewCellRing(256, 64)
	if err != nil {
		t.Fatal(err)
	}
	c, err := r.Consumer()
	if err != nil {
		t.Fatal(err)
	}
	ch := startChild(t, "cell-send", s, "RING", itoa(i), "N", itoa(n))
	ch.watchdog(t, time.Minute)
	buf := make([]byte, 64)
	for seq := uint64(0); seq < uint64(n); seq++ {
		k, err := c.Recv(buf)
		if err != nil {
			t.Fatalf("message %d: %v\n%s", seq, err, ch.stderr.Bytes())
		}
		if k != 8+int(seq%49) || !checkPattern(buf[:k], seq) {
			t.Fatalf("message %d: got %d bytes, seq %d", seq, k, binary.LittleEndian.Uint64(buf))
		}
	}
	if _, err := c.Recv(buf); err != ErrClosed {
		t.Fatalf("after the last message: %v", err)
	}
	ch.wait(t)
}

// TestProcessRecordStress: a producer process writes records of every
// size from 0 to 996 bytes, one by one or 37 at a time between Hold and
// Flush, through a 64 KiB ring; every one arrives once, in order, intact.
func TestProcessRecordStress(t *testing.T) {
	t.Run("one-by-one", func(t *testing.T) { recordStress(t, 1) })
	t.Run("held", func(t *testing.T) { recordStress(t, 37) })
}

func recordStress(t *testing.T, batch int) {
	n := stressCount(1_000_000)
	s := newTestSegment(t, SegmentSize(RecordRingSize(1<<16)))
	i, r, err := s.NewRecordRing(1 << 16)
	if err != nil {
		t.Fatal(err)
	}
	rd, err := r.Reader()
	if err != nil {
		t.Fatal(err)
	}
	ch := startChild(t, "record-send", s, "RING", itoa(i), "N", itoa(n), "BATCH", itoa(batch))
	ch.watchdog(t, time.Minute)
	seq := uint64(0)
	fn := func(typ uint32, p []byte) {
		if typ != uint32(seq%1000) || len(p) != int(seq%997) || !checkPattern(p, seq) {
			t.Fatalf("record %d: type %d, %d bytes", seq, typ, len(p))
		}
		seq++
	}
	for seq < uint64(n) {
		if _, err := rd.Read(fn, 64); err != nil {
			t.Fatalf("after %d records: %v\n%s", seq, err, ch.stderr.Bytes())
		}
	}
	if _, err := rd.Read(fn, 64); err != ErrClosed {
		t.Fatalf("after the last record: %v", err)
	}
	ch.wait(t)
}

func TestProcessMPSCStress(t *testing.T) {
	const producers = 3
	n := stressCount(1_000_000)
	s := newTestSegment(t, SegmentSize(MPSCRingSize(1<<14)))
	i, r, err := s.NewMPSCRing(1 << 14)
	if err != nil {
		t.Fatal(err)
	}
	rd, err := r.Reader()
	if err != nil {
		t.Fatal(err)
	}
	var kids []*child
	for id := range producers {
		ch := startChild(t, "mpsc-send", s, "RING", itoa(i), "N", itoa(n), "ID", itoa(id))
		ch.watchdog(t, time.Minute)
		kids = append(kids, ch)
	}
	next := make([]uint64, producers)
	ended := 0
	fn := mpscChecker(t, next, &ended)
	for ended < producers {
		if _, err := rd.Read(fn, 64); err != nil {
			t.Fatalf("after %v: %v", next, err)
		}
	}
	for id, ch := range kids {
		ch.wait(t)
		if next[id] != uint64(n) {
			t.Errorf("producer %d: %d records, want %d", id, next[id], n)
		}
	}
}

// mpscChecker returns a handler that checks each producer's records
// arrive in order and counts end records.
func mpscChecker(t *testing.T, next []uint64, ended *int) Handler {
	return func(typ uint32, p []byte) {
		if int(typ) >= len(next) {
			t.Fatalf("record of unknown producer %d", typ)
		}
		if string(p) == "end" {
			*ended++
			return
		}
		seq := next[typ]
		if len(p) != 8+int(seq%150) || !checkPattern(p, seq) {
			t.Fatalf("producer %d: record %d: %d bytes, seq %d", typ, seq, len(p), binary.LittleEndian.Uint64(p))
		}
		next[typ]++
	}
}

// TestProcessKillProducer kills a producer mid-stream: the consumer gets
// everything it published, in order, then ErrPeerDead.
func TestProcessKillProducer(t *testing.T) {
	testcvar.Set(t, "rings_check_spins", "1024")
	s := newTestSegment(t, SegmentSize(CellRingSize(64, 64)))
	i, r, _ := s.NewCellRing(64, 64)
	c, _ := r.Consumer()
	ch := startChild(t, "cell-send", s, "RING", itoa(i), "N", "0")
	buf := make([]byte, 64)
	seq := uint64(0)
	for ; seq < 100_000; seq++ {
		if k, err := c.Recv(buf); err != nil || !checkPattern(buf[:k], seq) {
			t.Fatalf("message %d: %v", seq, err)
		}
	}
	ch.cmd.Process.Kill() // not reaped: a zombie counts as dead
	start := time.Now()
	for {
		k, err := c.Recv(buf)
		if errors.Is(err, ErrPeerDead) {
			t.Logf("dead producer reported %v after the kill, %d messages received", time.Since(start), seq)
			break
		}
		if err != nil || !checkPattern(buf[:k], seq) {
			t.Fatalf("message %d: %v", seq, err)
		}
		seq++
	}
}

// TestProcessKillConsumer kills a consumer that stopped reading: the
// producer blocked on a full ring gets ErrPeerDead.
func TestProcessKillConsumer(t *testing.T) {
	testcvar.Set(t, "rings_check_spins", "1024")
	s := newTestSegment(t, SegmentSize(CellRingSize(16, 64)))
	i, r, _ := s.NewCellRing(16, 64)
	p, _ := r.Producer()
	ch := startChild(t, "cell-recv-stall", s, "RING", itoa(i), "N", "10")
	for k := 0; k < 26; k++ {
		if err := p.Send([]byte("m")); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.TrySend([]byte("m")); err != ErrFull {
		t.Fatalf("ring should be full: %v", err)
	}
	time.AfterFunc(50*time.Millisecond, func() { ch.cmd.Process.Kill() })
	if err := p.Send([]byte("m")); !errors.Is(err, ErrPeerDead) {
		t.Fatalf("Send to killed consumer: %v", err)
	}
}

// TestProcessKillMPSCProducer kills one of three producers of a
// many-to-one ring: the others' records all arrive in order, the killed
// one's arrive in order up to its death, and the reader reports it.
func TestProcessKillMPSCProducer(t *testing.T) {
	testcvar.Set(t, "rings_check_spins", "1024")
	const producers = 3
	n := stressCount(300_000)
	s := newTestSegment(t, SegmentSize(MPSCRingSize(1<<12)))
	i, r, _ := s.NewMPSCRing(1 << 12)
	rd, _ := r.Reader()
	var kids []*child
	for id := range producers {
		count := n
		if id == 1 {
			count = 0 // forever, until killed
		}
		ch := startChild(t, "mpsc-send", s, "RING", itoa(i), "N", itoa(count), "ID", itoa(id))
		ch.watchdog(t, time.Minute)
		kids = append(kids, ch)
	}
	next := make([]uint64, producers)
	ended := 0
	fn := mpscChecker(t, next, &ended)
	killed, reported := false, false
	deadline := time.Now().Add(time.Minute)
	for ended < producers-1 || !reported {
		if time.Now().After(deadline) {
			var kidState strings.Builder
			for id, ch := range kids {
				if childExited(ch) {
					fmt.Fprintf(&kidState, "\nproducer %d exited: %s", id, ch.exitStatus())
				}
			}
			for i := range MaxProducers {
				off := uintptr(offSlots + i*slotSize)
				w := atomic.LoadUint64(word64(rd.r.h.base, off))
				st := atomic.LoadUint64(word64(rd.r.h.base, off+8))
				pid, dead := rd.r.h.slotDead(off)
				if w != 0 {
					fmt.Fprintf(&kidState, "\nslot %d: word %#x start %d pid %d dead %v", i, w, st, pid, dead)
				}
			}
			for id, ch := range kids {
				fmt.Fprintf(&kidState, "\nproducer %d pid %d", id, ch.cmd.Process.Pid)
			}
			t.Fatalf("stuck: ended %d, reported %v, next %v, head %d tail %d, header %#x%s",
				ended, reported, next, rd.head, *rd.tailp, *rd.hdr(rd.head & rd.mask), kidState.String())
		}
		// Poll and Check rather than Read, which would wait past the
		// deadline if a record never came.
		n, err := rd.Poll(fn, 64)
		if n == 0 && err == nil {
			err = rd.Check()
		}
		if errors.Is(err, ErrPeerDead) {
			if !killed {
				t.Fatalf("ErrPeerDead before the kill: %v", err)
			}
			reported = true
			t.Logf("reported: %v", err)
		} else if err != nil {
			t.Fatal(err)
		}
		if !killed && next[1] > 1000 {
			kids[1].cmd.Process.Kill()
			killed = true
		}
	}
	if next[0] != uint64(n) || next[2] != uint64(n) {
		t.Fatalf("survivors delivered %d and %d, want %d", next[0], next[2], n)
	}
	t.Logf("killed producer delivered %d records", next[1])
}

func itoa(n int) string { return string(appendInt(nil, n)) }

func appendInt(b []byte, n int) []byte {
	if n >= 10 {
		b = appendInt(b, n/10)
	}
	return append(b, byte('0'+n%10))
}

// TestMPSCTakeoverReportsDeath: a producer that attaches after another
// died takes over the dead one's slot before the reader has looked; the
// reader still reports the death, once. (Under load, the last of
// TestProcessKillMPSCProducer's producers sometimes started after the
// kill and took the killed one's slot, and the death went unreported.)
func TestMPSCTakeoverReportsDeath(t *testing.T) {
	r, err := NewMPSCRing(AlignedBytes(MPSCRingSize(1024)), 1024)
	if err != nil {
		t.Fatal(err)
	}
	rd, err := r.Reader()
	if err != nil {
		t.Fatal(err)
	}
	gone := testrole.Command("exit", nil)

	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	pid := gone.Process.Pid // exited and reaped
	// Slot 0 as a producer that attached and died leaves it.
	atomic.StoreUint64(word64(r.h.base, offSlots), 1<<slotGenShift|uint64(pid)|slotReady)
	w, err := r.Writer()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if w.slot != offSlots || w.gen != 2 {
		t.Fatalf("the new producer took slot at %d, generation %d: want the dead one's, generation 2", w.slot, w.gen)
	}
	err = rd.Check()
	if !errors.Is(err, ErrPeerDead) || !strings.Contains(err.Error(), fmt.Sprint(pid)) {
		t.Fatalf("Check after the takeover: %v, want ErrPeerDead naming pid %d", err, pid)
	}
	if err := rd.Check(); err != nil {
		t.Fatalf("the death reported twice: %v", err)
	}
	// Records still flow, and nothing else is reported.
	if err := w.Write(1, []byte("after")); err != nil {
		t.Fatal(err)
	}
	if n, err := rd.Poll(func(uint32, []byte) {}, 8); n != 1 || err != nil {
		t.Fatalf("Poll after the takeover: %d records, %v", n, err)
	}
}
