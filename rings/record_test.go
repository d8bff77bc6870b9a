package rings

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/tachyon-hpc/tachyon/asm"
	"github.com/tachyon-hpc/tachyon/internal/testcvar"
)

func newRecordPair(t testing.TB, multi bool, capacity int) (*RecordRing, *RecordWriter, *RecordReader) {
	t.Helper()
	var r *RecordRing
	var err error
	if multi {
		r, err = NewMPSCRing(AlignedBytes(MPSCRingSize(capacity)), capacity)
	} else {
		r, err = NewRecordRing(AlignedBytes(RecordRingSize(capacity)), capacity)
	}
	if err != nil {
		t.Fatal(err)
	}
	w, err := r.Writer()
	if err != nil {
		t.Fatal(err)
	}
	rd, err := r.Reader()
	if err != nil {
		t.Fatal(err)
	}
	return r, w, rd
}

func forKinds(t *testing.T, f func(t *testing.T, multi bool)) {
	t.Run("spsc", func(t *testing.T) { f(t, false) })
	t.Run("mpsc", func(t *testing.T) { f(t, true) })
}

// TestRecordWrap writes records of every size through a small ring, so
// that padding records appear at every offset of the wrap, with the
// writer's prefetch off, at its default and beyond the ring's half.
func TestRecordWrap(t *testing.T) {
	for _, ahead := range []int{0, 64, 4096} {
		t.Run(fmt.Sprintf("prefetch=%d", ahead), func(t *testing.T) {
			testcvar.Set(t, "rings_prefetch_record_bytes", fmt.Sprint(ahead))
			forKinds(t, func(t *testing.T, multi bool) { recordWrap(t, multi, ahead) })
		})
	}
	// Records of 64 bytes and more prefetched whole.
	t.Run("prefetch-whole", func(t *testing.T) {
		testcvar.Set(t, "rings_prefetch_whole_record_bytes", "64")
		forKinds(t, func(t *testing.T, multi bool) { recordWrap(t, multi, 64) })
	})
}

func recordWrap(t *testing.T, multi bool, ahead int) {
	r, w, rd := newRecordPair(t, multi, 1024)
	if want := uint64(min(ahead, 512)); multi && w.ahead != 0 || !multi && w.ahead != want {
		t.Fatalf("prefetch distance %d, want %d (0 on a many-to-one ring)", w.ahead, want)
	}
	if r.MaxPayload() != 120 {
		t.Fatalf("MaxPayload %d", r.MaxPayload())
	}
	buf := make([]byte, 128)
	var got, sent uint64
	check := func(typ uint32, p []byte) {
		if typ != uint32(got%7) || len(p) != int(got%121) || !checkPattern(p, got) {
			t.Fatalf("record %d: type %d, %d bytes %v", got, typ, len(p), p)
		}
		got++
	}
	for sent < 5000 {
		m := buf[:sent%121]
		pattern(m, sent)
		// Prefetching or not, per record, never changes what arrives.
		on := sent%3 != 0
		w.SetPrefetch(on)
		if got, want := w.Prefetching(), on && !multi && ahead != 0; got != want {
			t.Fatalf("Prefetching() = %v after SetPrefetch(%v), want %v", got, on, want)
		}
		switch err := w.TryWrite(uint32(sent%7), m); err {
		case nil:
			sent++
		case ErrFull:
			if n, err := rd.Poll(check, 3); n == 0 || err != nil {
				t.Fatalf("full ring, Poll = %d, %v", n, err)
			}
		default:
			t.Fatal(err)
		}
	}
	for got < sent {
		if n, err := rd.Poll(check, 100); n == 0 || err != nil {
			t.Fatalf("drain: %d %v", n, err)
		}
	}
	if n, err := rd.Poll(check, 100); n != 0 || err != nil {
		t.Fatalf("empty: %d %v", n, err)
	}
	if err := w.TryWrite(0, make([]byte, 121)); err != ErrTooLarge {
		t.Fatalf("oversize: %v", err)
	}
	if err := w.TryWrite(MaxRecordType+1, nil); err != ErrInvalid {
		t.Fatalf("padding type: %v", err)
	}
}

func TestRecordClaimAbort(t *testing.T) {
	forKinds(t, func(t *testing.T, multi bool) {
		_, w, rd := newRecordPair(t, multi, 1024)
		p, err := w.Claim(5)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Claim(1); err != ErrInvalid {
			t.Fatalf("second claim: %v", err)
		}
		copy(p, "abort")
		w.Abort()
		p, _ = w.Claim(4)
		copy(p, "kept")
		if err := w.Commit(9); err != nil {
			t.Fatal(err)
		}
		if err := w.Commit(9); err != ErrInvalid {
			t.Fatalf("commit without claim: %v", err)
		}
		var seen []string
		n, err := rd.Poll(func(typ uint32, p []byte) { seen = append(seen, string(p)) }, 10)
		if n != 1 || err != nil || seen[0] != "kept" {
			t.Fatalf("Poll = %d %v %q", n, err, seen)
		}
		w.Close()
		if err := w.TryWrite(1, nil); err != ErrClosed {
			t.Fatalf("write after close: %v", err)
		}
	})
}

func TestRecordClose(t *testing.T) {
	r, w, rd := newRecordPair(t, false, 1024)
	w.TryWrite(1, []byte("x"))
	w.Close()
	if _, err := r.Writer(); err != ErrClosed {
		t.Fatalf("reattach: %v", err)
	}
	nop := func(uint32, []byte) {}
	if n, err := rd.Read(nop, 10); n != 1 || err != nil {
		t.Fatalf("Read = %d %v", n, err)
	}
	if n, err := rd.Read(nop, 10); n != 0 || err != ErrClosed {
		t.Fatalf("Read after close = %d %v", n, err)
	}
	rd.Close()
	if _, err := rd.Poll(nop, 1); err != ErrClosed {
		t.Fatalf("Poll after own close: %v", err)
	}
}

func TestRecordDeadPeer(t *testing.T) {
	r, w, rd := newRecordPair(t, false, 1024)
	dead := deadPID(t)
	fakeSlot(r.h, offConsumerSlot, dead)
	fakeSlot(r.h, offProducerSlot, dead)
	for w.TryWrite(1, []byte("x")) == nil {
	}
	if err := w.Write(1, []byte("x")); !errors.Is(err, ErrPeerDead) {
		t.Fatalf("Write to dead reader: %v", err)
	}
	nop := func(uint32, []byte) {}
	for {
		n, err := rd.Read(nop, 100)
		if errors.Is(err, ErrPeerDead) {
			break
		}
		if n == 0 || err != nil {
			t.Fatalf("Read = %d %v", n, err)
		}
	}
}

func TestRecordMalformed(t *testing.T) {
	forKinds(t, func(t *testing.T, multi bool) {
		_, w, rd := newRecordPair(t, multi, 1024)
		w.TryWrite(1, []byte("first"))
		w.TryWrite(2, []byte("second"))
		w.TryWrite(3, []byte("third"))
		// Corrupt the second record's length.
		hp := rd.hdr(16)
		*hp = *hp&^0xffffffff | 5000
		before := pvMalformed.Value()
		var seen []string
		fn := func(typ uint32, p []byte) { seen = append(seen, string(p)) }
		n, err := rd.Poll(fn, 10)
		if n != 1 || err != ErrCorrupt || seen[0] != "first" {
			t.Fatalf("Poll = %d %v %q", n, err, seen)
		}
		if pvMalformed.Value()-before != 1 {
			t.Fatal("not counted")
		}
		// The ring goes on after the dropped stretch.
		w.TryWrite(4, []byte("fourth"))
		if n, err := rd.Poll(fn, 10); n != 1 || err != nil || seen[1] != "fourth" {
			t.Fatalf("after drop: %d %v %q", n, err, seen)
		}
	})
}

// TestRecordNext streams records of every size through a small ring (so
// that padding comes at every offset of the wrap) and reads them one at a
// time with Next, releasing after a varying number: every record arrives
// whole and in order, Record sees what Next handed out, and no more than
// max are out at once.
func TestRecordNext(t *testing.T) {
	r, w, rd := newRecordPair(t, false, 1024)
	max := r.MaxPayload()
	buf := make([]byte, max)
	var sent, got uint64
	out := 0
	for got < 4000 {
		for sent-got < 40 {
			m := buf[:sent%uint64(max/2+1)]
			pattern(m, sent)
			if err := w.TryWrite(uint32(sent%5), m); err == ErrFull {
				break
			} else if err != nil {
				t.Fatal(err)
			}
			sent++
		}
		limit := int(got%7) + 1
		for {
			p, err := rd.Next(limit)
			if err != nil {
				t.Fatal(err)
			}
			if p == nil {
				break
			}
			if len(p) != int(got%uint64(max/2+1)) || !checkPattern(p, got) {
				t.Fatalf("record %d: %d bytes %v", got, len(p), p)
			}
			if r := rd.Record(out); len(r) != len(p) || len(p) > 0 && &r[0] != &p[0] {
				t.Fatalf("record %d: Record(%d) is not what Next handed out", got, out)
			}
			got++
			out++
		}
		if out > limit {
			t.Fatalf("%d records out, max %d", out, limit)
		}
		if out < limit && got < sent {
			t.Fatalf("Next stopped at %d of %d with %d ready", out, limit, sent-got)
		}
		rd.Release(out)
		out = 0
	}
}

// fillRecords writes records of type 1 numbered from seq on, each of
// size(seq) bytes of pattern, until the ring is full, and returns the
// next number. buf holds the largest.
func fillRecords(t *testing.T, w *RecordWriter, buf []byte, size func(uint64) int, seq uint64) uint64 {
	t.Helper()
	for {
		m := buf[:size(seq)]
		pattern(m, seq)
		if err := w.TryWrite(1, m); err == ErrFull {
			return seq
		} else if err != nil {
			t.Fatal(err)
		}
		seq++
	}
}

// TestRecordNextReady: NextReady hands out the records Next would, in
// order, and nil where Next has more to say (nothing ready, the batch's
// max out, padding at the wrap, a malformed header), leaving those for
// Next: a reader that falls back on Next when it returns nil reads the
// whole stream, padding at every offset included.
func TestRecordNextReady(t *testing.T) {
	r, w, rd := newRecordPair(t, false, 1024)
	if p := rd.NextReady(10); p != nil {
		t.Fatalf("empty ring: NextReady = %v", p)
	}
	max := r.MaxPayload()
	buf := make([]byte, max)
	size := func(seq uint64) int { return int(seq * 7 % uint64(max/2+1)) }
	var sent, got, ready, fallback uint64
	for got < 4000 {
		sent = fillRecords(t, w, buf, size, sent)
		limit := int(got%7) + 1
		out := 0
		for {
			p := rd.NextReady(limit)
			if p != nil {
				ready++
			} else {
				var err error
				if p, err = rd.Next(limit); err != nil {
					t.Fatal(err)
				}
				if p == nil {
					break
				}
				fallback++
			}
			if len(p) != size(got) || !checkPattern(p, got) {
				t.Fatalf("record %d: %d bytes %v", got, len(p), p)
			}
			got++
			out++
		}
		if out != limit && got < sent {
			t.Fatalf("%d records out of a batch of %d with %d ready", out, limit, sent-got)
		}
		if p := rd.NextReady(limit); p != nil {
			t.Fatalf("NextReady past the batch's max: %d bytes", len(p))
		}
		rd.Release(out)
	}
	if ready == 0 || fallback == 0 {
		t.Fatalf("%d records from NextReady, %d from Next: want both", ready, fallback)
	}

	// Malformed headers: a length past the largest payload, one within
	// it that runs past the ring's end (writers pad there), and one
	// shorter than the header. NextReady leaves them to Next, which
	// reports them.
	for n := 0; ; n++ { // the stream's rest
		if p, err := rd.Next(1 << 20); err != nil || p == nil {
			rd.Release(n)
			break
		}
	}
	capacity := uint64(1024)
	for _, bad := range []string{"too long", "overrun", "below the header"} {
		overrun := bad == "overrun"
		for {
			if err := w.TryWrite(1, make([]byte, 16)); err != nil {
				t.Fatal(err)
			}
			idx := rd.head & rd.mask
			if !overrun || idx >= capacity-64 {
				hp := rd.hdr(idx)
				length := uint64(max) + recordHeader + 8
				switch bad {
				case "overrun":
					length = capacity - idx + 64
				case "below the header":
					length = recordHeader - 3
				}
				*hp = *hp&^0xffffffff | length
				break
			}
			if p, err := rd.Next(1); len(p) != 16 || err != nil {
				t.Fatalf("filler record: %v, %v", p, err)
			}
			rd.Release(1)
		}
		if p := rd.NextReady(10); p != nil {
			t.Fatalf("malformed header (%s): NextReady = %q", bad, p)
		}
		if p, err := rd.Next(10); p != nil || err != ErrCorrupt {
			t.Fatalf("Next at the malformed header (%s) = %q, %v", bad, p, err)
		}
	}
}

// TestRecordNextPartial mixes Peek, Next and NextReady in one batch and
// releases part of what is out: Record finds every record out, Peek's and Next's, a
// partial Release gives back exactly the records it names (and the padding
// before them), and the rest are handed out again, in order, by the next
// batch. Records of every size through a small ring put padding at every
// offset.
func TestRecordNextPartial(t *testing.T) {
	r, w, rd := newRecordPair(t, false, 1024)
	max := r.MaxPayload()
	buf := make([]byte, max)
	size := func(seq uint64) int { return int(seq * 7 % uint64(max/2+1)) }
	var sent, got uint64
	for round := 0; got < 4000; round++ {
		sent = fillRecords(t, w, buf, size, sent)
		var out [][]byte
		if peek := round % 3; peek > 0 {
			k, err := rd.Peek(peek)
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < k; i++ {
				out = append(out, rd.Record(i))
			}
		}
		for limit := round%5 + len(out) + 1; ; {
			var p []byte
			if round%2 == 0 { // NextReady first, Next for what it leaves
				p = rd.NextReady(limit)
			}
			if p == nil {
				var err error
				if p, err = rd.Next(limit); err != nil {
					t.Fatal(err)
				}
			}
			if p == nil {
				break
			}
			out = append(out, p)
		}
		for i, p := range out {
			if len(p) != size(got+uint64(i)) || !checkPattern(p, got+uint64(i)) {
				t.Fatalf("round %d: record %d: %d bytes %v", round, got+uint64(i), len(p), p)
			}
			if q := rd.Record(i); len(q) != len(p) || len(p) > 0 && &q[0] != &p[0] {
				t.Fatalf("round %d: Record(%d) is not the record handed out", round, i)
			}
		}
		if rd.Record(len(out)) != nil {
			t.Fatalf("round %d: Record(%d) past the %d out", round, len(out), len(out))
		}
		k := len(out) - round%4
		if k < 0 {
			k = len(out)
		}
		rd.Release(k)
		got += uint64(k)
		if rd.next != rd.head { // nothing out: NextReady starts from next
			t.Fatalf("round %d: next %d, head %d after Release", round, rd.next, rd.head)
		}
	}
	if got > sent {
		t.Fatalf("read %d of %d records", got, sent)
	}
}

// TestRecordWarm: Warm asks for the lines from the tail's on, never past
// what the reader is known to have released, writes nothing, and asks for
// none on a many-to-one ring or once closed.
func TestRecordWarm(t *testing.T) {
	_, w, rd := newRecordPair(t, false, 1024) // 16 lines
	if n := w.Warm(4); n != 4 {
		t.Fatalf("fresh ring: Warm(4) asked for %d lines", n)
	}
	if n := w.Warm(100); n != 16 {
		t.Fatalf("fresh ring: Warm(100) asked for %d lines, want the 16 of the ring", n)
	}
	msg := make([]byte, 32)   // 40-byte records
	for i := 0; i < 13; i++ { // tail 520, in the line at 512
		pattern(msg, uint64(i))
		if err := w.TryWrite(1, msg); err != nil {
			t.Fatal(err)
		}
	}
	// Nothing released: the lines at 512 to 960 are free or the tail's.
	if n := w.Warm(100); n != 8 {
		t.Fatalf("half-full ring: Warm(100) asked for %d lines, want 8", n)
	}
	for i := 0; i < 13; i++ {
		p, err := rd.Next(64)
		if err != nil || !checkPattern(p, uint64(i)) {
			t.Fatalf("record %d after Warm: %v %v", i, p, err)
		}
	}
	rd.Release(13)
	if p, err := rd.Next(64); p != nil || err != nil {
		t.Fatalf("Warm published something: %v %v", p, err)
	}
	w.Close()
	if n := w.Warm(4); n != 0 {
		t.Fatalf("closed writer: Warm asked for %d lines", n)
	}
	_, mw, _ := newRecordPair(t, true, 1024)
	if n := mw.Warm(4); n != 0 {
		t.Fatalf("many-to-one writer: Warm asked for %d lines", n)
	}
}

// TestRecordNextMalformed: a malformed record after others ends what Next
// hands out; once they are released it is dropped, with everything after
// it, counted and reported, and padding before it is consumed with it.
// Next is for single-producer rings, and reports a closed reader.
func TestRecordNextMalformed(t *testing.T) {
	_, w, rd := newRecordPair(t, false, 1024)
	for _, s := range []string{"first", "second", "third"} {
		if err := w.TryWrite(1, []byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	hp := rd.hdr(16) // the second record's header
	*hp = *hp&^0xffffffff | 5000
	before := pvMalformed.Value()
	if p, err := rd.Next(10); string(p) != "first" || err != nil {
		t.Fatalf("Next = %q, %v", p, err)
	}
	if p, err := rd.Next(10); p != nil || err != nil {
		t.Fatalf("Next after the first = %q, %v; want nothing until the Release", p, err)
	}
	rd.Release(1)
	if p, err := rd.Next(10); p != nil || err != ErrCorrupt {
		t.Fatalf("Next at the malformed record = %q, %v", p, err)
	}
	if pvMalformed.Value()-before != 1 {
		t.Fatal("not counted")
	}
	if err := w.TryWrite(1, []byte("fourth")); err != nil {
		t.Fatal(err)
	}
	if p, err := rd.Next(10); string(p) != "fourth" || err != nil {
		t.Fatalf("after the drop: %q, %v", p, err)
	}
	rd.Release(1)

	// Padding at the wrap, then a malformed record at the ring's start,
	// met by Next and by Peek: the padding goes with it.
	for _, peek := range []bool{false, true} {
		for w.tail%1024 < 1024-64 {
			if err := w.TryWrite(1, make([]byte, 16)); err != nil {
				t.Fatal(err)
			}
			for p, _ := rd.Next(10); p != nil; p, _ = rd.Next(10) {
			}
			rd.Release(10)
		}
		pad := w.tail & w.mask
		if err := w.TryWrite(1, make([]byte, 100)); err != nil { // too long for the rest: padding, then the record at 0
			t.Fatal(err)
		}
		if *rd.hdr(pad) == 0 {
			t.Fatal("no padding at the wrap: the test shows nothing")
		}
		*rd.hdr(0) = *rd.hdr(0)&^0xffffffff | 5000
		var err error
		if peek {
			_, err = rd.Peek(10)
		} else {
			_, err = rd.Next(10)
		}
		if err != ErrCorrupt {
			t.Fatalf("peek %v: at the malformed record after padding: %v", peek, err)
		}
		if *rd.hdr(pad) != 0 {
			t.Fatalf("peek %v: the padding before the malformed record was left in place", peek)
		}
	}

	if err := rd.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := rd.Next(10); err != ErrClosed {
		t.Fatalf("Next on a closed reader = %v", err)
	}
	_, _, mrd := newRecordPair(t, true, 1024)
	if _, err := mrd.Next(10); err != ErrInvalid {
		t.Fatalf("Next on a many-to-one ring = %v", err)
	}
}

// TestMPSCAbandonedClaim: a producer dies holding a claim; the reader
// skips it once it sees the death and goes on with the others.
func TestMPSCAbandonedClaim(t *testing.T) {
	testcvar.Set(t, "rings_check_spins", "4")
	r, w, rd := newRecordPair(t, true, 1024)
	ghost, _ := r.Writer()
	if _, err := ghost.Claim(10); err != nil {
		t.Fatal(err)
	}
	w.TryWrite(1, []byte("after"))
	// The ghost's process "dies".
	fakeSlot(r.h, ghost.slot, deadPID(t))
	*word64(r.h.base, ghost.slot) = *word64(r.h.base, ghost.slot)&^(slotGenMask<<slotGenShift) | uint64(ghost.gen)<<slotGenShift
	before := pvAbandoned.Value()
	var seen []string
	fn := func(typ uint32, p []byte) { seen = append(seen, string(p)) }
	var err error
	for i := 0; i < 100 && len(seen) == 0; i++ {
		_, err = rd.Poll(fn, 10)
		if err != nil && !errors.Is(err, ErrPeerDead) {
			t.Fatal(err)
		}
	}
	if len(seen) != 1 || seen[0] != "after" || pvAbandoned.Value()-before != 1 {
		t.Fatalf("seen %q, abandoned %d", seen, pvAbandoned.Value()-before)
	}
}

// TestMPSCUnmarkedClaim: a producer dies between reserving space and
// marking it; the reader turns the zeroed gap into padding, but only once
// the gap has lasted rings_unblock_wait (a live producer descheduled
// there looks the same).
func TestMPSCUnmarkedClaim(t *testing.T) {
	testcvar.Set(t, "rings_check_spins", "4")
	testcvar.Set(t, "rings_unblock_checks", "2")
	testcvar.Set(t, "rings_unblock_wait", "50ms")
	r, w, rd := newRecordPair(t, true, 1024)
	ghost, _ := r.Writer()
	// Reserve 32 bytes as the ghost would, without marking them.
	atomic.AddUint64(word64(r.h.base, offTail), 32)
	w.TryWrite(1, []byte("after"))
	var seen []string
	fn := func(typ uint32, p []byte) { seen = append(seen, string(p)) }
	stuck := time.Now()
	for i := 0; i < 100; i++ {
		rd.Poll(fn, 10)
	}
	if len(seen) != 0 {
		t.Fatal("skipped a live producer's claim")
	}
	fakeSlot(r.h, ghost.slot, deadPID(t))
	died := time.Now()
	var dead bool
	for time.Since(died) < 10*time.Second && len(seen) == 0 {
		if _, err := rd.Poll(fn, 10); errors.Is(err, ErrPeerDead) {
			dead = true
		}
	}
	if len(seen) != 1 || seen[0] != "after" || !dead {
		t.Fatalf("seen %q, dead reported %v", seen, dead)
	}
	// The reader was stuck at the gap before the death: the wait counts
	// from then, so only a lower bound on the whole is certain.
	if el := time.Since(stuck); el < 50*time.Millisecond {
		t.Fatalf("gap skipped %v after the reader met it, before rings_unblock_wait", el)
	}
}

func TestMPSCSlots(t *testing.T) {
	r, _, _ := newRecordPair(t, true, 1024)
	var ws []*RecordWriter
	for {
		w, err := r.Writer()
		if err != nil {
			if err != ErrBusy {
				t.Fatal(err)
			}
			break
		}
		ws = append(ws, w)
	}
	if len(ws) != MaxProducers-1 {
		t.Fatalf("%d writers attached", len(ws)+1)
	}
	ws[3].Close()
	if _, err := r.Writer(); err != nil {
		t.Fatalf("slot of a closed writer not reused: %v", err)
	}
}

// TestMPSCGoroutines: several producers, one reader; every record arrives
// once and in order per producer.
func TestMPSCGoroutines(t *testing.T) {
	const producers = 4
	n := 50000
	if raceEnabled || testing.Short() {
		n = 10000
	}
	r, _, rd := newRecordPair(t, true, 4096)
	var wg sync.WaitGroup
	for id := 0; id < producers; id++ {
		w, err := r.Writer()
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 64)
			for i := 0; i < n; i++ {
				m := buf[:8+i%50]
				pattern(m, uint64(i))
				if err := w.Write(uint32(id), m); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	next := make([]uint64, producers)
	total := 0
	fn := func(typ uint32, p []byte) {
		seq := binary.LittleEndian.Uint64(p)
		if typ >= producers || seq != next[typ] || len(p) != 8+int(seq%50) || !checkPattern(p, seq) {
			t.Fatalf("producer %d: got %d, want %d (%d bytes)", typ, seq, next[typ], len(p))
		}
		next[typ]++
		total++
	}
	for total < producers*n {
		if _, err := rd.Read(fn, 64); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
}

// TestMPSCCorruptIndices: a shared head beyond the shared tail (a corrupt
// or malicious peer) makes a many-to-one writer's TryWrite return
// ErrCorrupt instead of retrying forever.
func TestMPSCCorruptIndices(t *testing.T) {
	r, w, _ := newRecordPair(t, true, 1024)
	if err := w.TryWrite(1, []byte("ok")); err != nil {
		t.Fatal(err)
	}
	atomic.StoreUint64(word64(r.h.base, offHead), 1<<20)
	w, err := r.Writer() // caches the impossible head
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- w.TryWrite(1, []byte("after")) }()
	select {
	case err := <-done:
		if err != ErrCorrupt {
			t.Fatalf("TryWrite = %v, want ErrCorrupt", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("TryWrite still spinning after 10s")
	}
}

// TestMPSCDeathThenCorrupt: one Poll skips a dead producer's claim and
// then meets a malformed record. It reports ErrCorrupt; the death is not
// lost but reported by the next Poll.
func TestMPSCDeathThenCorrupt(t *testing.T) {
	testcvar.Set(t, "rings_check_spins", "1")
	r, w, rd := newRecordPair(t, true, 1024)
	ghost, _ := r.Writer()
	if _, err := ghost.Claim(10); err != nil {
		t.Fatal(err)
	}
	w.TryWrite(1, []byte("soon malformed"))
	hp := rd.hdr(24) // after the ghost's 8+10 bytes, rounded up
	*hp = *hp&^0xffffffff | 5000
	gen := *word64(r.h.base, ghost.slot) & (slotGenMask << slotGenShift)
	fakeSlot(r.h, ghost.slot, deadPID(t))
	*word64(r.h.base, ghost.slot) = *word64(r.h.base, ghost.slot)&^(slotGenMask<<slotGenShift) | gen
	n, err := rd.Poll(func(uint32, []byte) {}, 10)
	if n != 0 || err != ErrCorrupt {
		t.Fatalf("first Poll = %d, %v; want ErrCorrupt", n, err)
	}
	if n, err := rd.Poll(func(uint32, []byte) {}, 10); n != 0 || !errors.Is(err, ErrPeerDead) {
		t.Fatalf("second Poll = %d, %v; want the death", n, err)
	}
	if n, err := rd.Poll(func(uint32, []byte) {}, 10); n != 0 || err != nil {
		t.Fatalf("third Poll = %d, %v", n, err)
	}
}

// TestMPSCTwoDeaths: two producers found dead in one look are both
// reported.
func TestMPSCTwoDeaths(t *testing.T) {
	r, _, rd := newRecordPair(t, true, 1024)
	a, _ := r.Writer()
	b, _ := r.Writer()
	pa, pb := deadPID(t), deadPID(t)
	fakeSlot(r.h, a.slot, pa)
	fakeSlot(r.h, b.slot, pb)
	err := rd.Check()
	if !errors.Is(err, ErrPeerDead) || !strings.Contains(err.Error(), itoa(pa)) || !strings.Contains(err.Error(), itoa(pb)) {
		t.Fatalf("Check = %v, want the deaths of %d and %d", err, pa, pb)
	}
	if err := rd.Check(); err != nil {
		t.Fatalf("second Check = %v", err)
	}
}

// TestRecordLinePadding: with line padding on, no record of up to a line
// that follows one of its size spans two lines, every record arrives intact and in order across the
// wrap, and the padding costs no more than the rest of a line; with it
// off, records are packed (and some span two lines). On a many-to-one
// ring the setting has no effect.
func TestRecordLinePadding(t *testing.T) {
	for _, pad := range []bool{false, true} {
		t.Run(fmt.Sprintf("pad=%v", pad), func(t *testing.T) {
			_, w, rd := newRecordPair(t, false, 1024)
			w.SetLinePadding(pad)
			spans, seq := 0, 0
			for round := 0; round < 200; round++ {
				// Payloads of 0 to 56 bytes: records of 8 to 64.
				n := (round * 8) % 57
				for k := 0; k < 3; k++ {
					p := make([]byte, n+8)[:n]
					for i := range p {
						p[i] = byte(seq + i)
					}
					start := w.tail
					if err := w.TryWrite(1, p); err != nil {
						t.Fatalf("round %d: %v", round, err)
					}
					if used := w.tail - start; used > align(uint64(recordHeader+n), recordAlign)+CacheLine-recordAlign {
						t.Fatalf("a %d-byte record took %d bytes", n, used)
					}
					seq++
				}
				got, err := rd.Peek(8)
				if err != nil || got != 3 {
					t.Fatalf("round %d: Peek %d, %v", round, got, err)
				}
				for i := 0; i < got; i++ {
					r := rd.recs[i]
					// Padding foresees a record of the same size: the first
					// of a new size may span two lines.
					if hdr := r.idx - recordHeader; i > 0 && hdr/CacheLine != (hdr+recordHeader+r.n-1)/CacheLine {
						spans++
					}
					b := rd.Record(i)
					s := seq - got + i
					if len(b) != n || n > 0 && (b[0] != byte(s) || b[n-1] != byte(s+n-1)) {
						t.Fatalf("round %d: record %d is %v", round, s, b)
					}
				}
				rd.Release(got)
			}
			if pad && spans != 0 {
				t.Fatalf("%d records spanned two lines with padding on", spans)
			}
			if !pad && spans == 0 {
				t.Fatal("no record spanned two lines with padding off: the test shows nothing")
			}
		})
	}
	t.Run("mpsc", func(t *testing.T) {
		_, w, rd := newRecordPair(t, true, 1024)
		w.SetLinePadding(true)
		for i := 0; i < 3; i++ {
			if err := w.TryWrite(1, make([]byte, 16)); err != nil {
				t.Fatal(err)
			}
		}
		if w.tail != 0 || asm.LoadAcquire64(w.tailp) != 3*24 {
			t.Fatalf("many-to-one tail at %d: padded", asm.LoadAcquire64(w.tailp))
		}
		if n, err := rd.Poll(func(uint32, []byte) {}, 8); n != 3 || err != nil {
			t.Fatalf("Poll %d, %v", n, err)
		}
	})
}

// TestRecordHold: records committed during a hold stay unseen until
// Flush, then arrive all at once and in order; a full ring publishes what
// is held (the reader could not free room otherwise) and the hold goes on;
// an aborted claim leaves no record; Close flushes; a many-to-one ring
// cannot hold.
func TestRecordHold(t *testing.T) {
	_, w, rd := newRecordPair(t, false, 1024)
	read := func() []string {
		t.Helper()
		var got []string
		if _, err := rd.Poll(func(typ uint32, p []byte) { got = append(got, fmt.Sprint(typ, ":", string(p))) }, 100); err != nil {
			t.Fatal(err)
		}
		return got
	}
	if err := w.Hold(); err != nil {
		t.Fatal(err)
	}
	for i, s := range []string{"a", "bb", "ccc"} {
		if err := w.TryWrite(uint32(i+1), []byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	if got := read(); len(got) != 0 {
		t.Fatalf("held records seen: %v", got)
	}
	w.Flush()
	if got := strings.Join(read(), " "); got != "1:a 2:bb 3:ccc" {
		t.Fatalf("after Flush: %q", got)
	}

	// Full while holding.
	w.Hold()
	sent := 0
	for ; ; sent++ {
		if err := w.TryWrite(7, make([]byte, 100)); err == ErrFull {
			break
		} else if err != nil {
			t.Fatal(err)
		}
	}
	if got := read(); len(got) != sent {
		t.Fatalf("a full ring published %d of %d held records", len(got), sent)
	}
	if err := w.TryWrite(8, []byte("after")); err != nil {
		t.Fatal(err)
	}
	if got := read(); len(got) != 0 {
		t.Fatalf("the hold ended at a full ring: %v", got)
	}

	// An aborted claim during the hold.
	if _, err := w.Claim(5); err != nil {
		t.Fatal(err)
	}
	w.Abort()
	if err := w.TryWrite(9, []byte("last")); err != nil {
		t.Fatal(err)
	}
	w.Flush()
	if got := strings.Join(read(), " "); got != "8:after 9:last" {
		t.Fatalf("after an abort: %q", got)
	}

	// Close flushes.
	w.Hold()
	if err := w.TryWrite(10, []byte("bye")); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(read(), " "); got != "10:bye" {
		t.Fatalf("after Close: %q", got)
	}
	if err := w.Hold(); err != ErrClosed {
		t.Fatalf("Hold after Close: %v", err)
	}

	_, mw, _ := newRecordPair(t, true, 1024)
	if err := mw.Hold(); err != ErrInvalid {
		t.Fatalf("Hold on a many-to-one ring: %v", err)
	}
}

// TestRecordHoldConcurrent: a writer goroutine sends records of varying
// sizes in holds of varying length through a small ring while a reader
// goroutine reads them: all arrive, in order (run with -race).
func TestRecordHoldConcurrent(t *testing.T) {
	const n = 200_000
	_, w, rd := newRecordPair(t, false, 1024)
	done := make(chan error, 1)
	go func() {
		done <- func() error {
			buf := make([]byte, 64)
			for i := 0; i < n; {
				w.Hold()
				for end := min(n, i+1+i%13); i < end; i++ {
					m := buf[:8+i%57]
					binary.LittleEndian.PutUint64(m, uint64(i))
					if err := w.Write(1, m); err != nil {
						return err
					}
				}
				w.Flush()
			}
			return w.Close()
		}()
	}()
	next := 0
	for next < n {
		_, err := rd.Read(func(_ uint32, p []byte) {
			if len(p) != 8+next%57 || binary.LittleEndian.Uint64(p) != uint64(next) {
				t.Fatalf("record %d: %d bytes, seq %d", next, len(p), binary.LittleEndian.Uint64(p))
			}
			next++
		}, 64)
		if err != nil {
			t.Fatalf("after %d records: %v", next, err)
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestRecordWriteWords writes records of two words and a payload of
// every size through a small ring with TryWriteWords, on both kinds of
// ring, with and without line padding and while holding: every record
// arrives whole and in order, and the errors are TryWrite's.
func TestRecordWriteWords(t *testing.T) {
	for _, mode := range []string{"plain", "padded", "holding"} {
		t.Run(mode, func(t *testing.T) {
			forKinds(t, func(t *testing.T, multi bool) { recordWriteWords(t, multi, mode) })
		})
	}
}

func recordWriteWords(t *testing.T, multi bool, mode string) {
	r, w, rd := newRecordPair(t, multi, 1024)
	w.SetLinePadding(mode == "padded")
	if mode == "holding" && !multi {
		if err := w.Hold(); err != nil {
			t.Fatal(err)
		}
	}
	max := r.MaxPayload() - 16
	buf := make([]byte, max)
	var got, sent uint64
	check := func(typ uint32, p []byte) {
		n := int(got % uint64(max+1))
		if typ != uint32(got%7) || len(p) != 16+n || binary.LittleEndian.Uint64(p) != got ||
			binary.LittleEndian.Uint64(p[8:]) != ^got || !checkPattern(p[16:], got) {
			t.Fatalf("record %d: type %d, %d bytes %v", got, typ, len(p), p)
		}
		got++
	}
	for sent < 3000 {
		m := buf[:sent%uint64(max+1)]
		pattern(m, sent)
		switch err := w.TryWriteWords(uint32(sent%7), sent, ^sent, m); err {
		case nil:
			sent++
			if sent%5 == 0 {
				w.Flush() // a held ring publishes every fifth record
			}
		case ErrFull:
			w.Flush()
			if n, err := rd.Poll(check, 3); n == 0 || err != nil {
				t.Fatalf("full ring, Poll = %d, %v", n, err)
			}
		default:
			t.Fatal(err)
		}
	}
	w.Flush()
	for got < sent {
		if n, err := rd.Poll(check, 100); n == 0 || err != nil {
			t.Fatalf("drain: %d %v", n, err)
		}
	}
	if err := w.TryWriteWords(0, 0, 0, make([]byte, max+1)); err != ErrTooLarge {
		t.Fatalf("oversize: %v", err)
	}
	if err := w.TryWriteWords(MaxRecordType+1, 0, 0, nil); err != ErrInvalid {
		t.Fatalf("padding type: %v", err)
	}
	if _, err := w.Claim(8); err != nil {
		t.Fatal(err)
	}
	if err := w.TryWriteWords(0, 0, 0, nil); err != ErrInvalid {
		t.Fatalf("with a claim open: %v", err)
	}
	w.Abort()
	w.Close()
	if err := w.TryWriteWords(0, 0, 0, nil); err != ErrClosed {
		t.Fatalf("closed: %v", err)
	}
}

// TestRecordWriteWordsLayout: TryWriteWords lays records out exactly as
// TryWrite of the same bytes does, line padding included.
func TestRecordWriteWordsLayout(t *testing.T) {
	for _, padded := range []bool{false, true} {
		_, a, _ := newRecordPair(t, false, 1<<16)
		_, b, _ := newRecordPair(t, false, 1<<16)
		a.SetLinePadding(padded)
		b.SetLinePadding(padded)
		rec := make([]byte, 16+100)
		for i := uint64(0); i < 500; i++ {
			n := int(i*7) % 101
			binary.LittleEndian.PutUint64(rec, i)
			binary.LittleEndian.PutUint64(rec[8:], ^i)
			pattern(rec[16:16+n], i)
			if err := a.TryWriteWords(1, i, ^i, rec[16:16+n]); err != nil {
				t.Fatal(err)
			}
			if err := b.TryWrite(1, rec[:16+n]); err != nil {
				t.Fatal(err)
			}
			if a.tail != b.tail {
				t.Fatalf("padded %v: record %d of %d bytes ends at %d, TryWrite's at %d", padded, i, 16+n, a.tail, b.tail)
			}
		}
		if !bytes.Equal(unsafe.Slice((*byte)(a.data), a.capacity), unsafe.Slice((*byte)(b.data), b.capacity)) {
			t.Fatalf("padded %v: the rings' bytes differ", padded)
		}
	}
}

// TestRecordWholePrefetchOutsideStreams checks that a record long enough to
// be prefetched whole (rings_prefetch_whole_record_bytes) is, through
// TryWriteWords, only while the stream prefetch is off: in a stream it is
// written in line like a short one. Records of every length up to 2 KiB,
// with the prefetch switched every few records, lie exactly where
// TryWrite puts them.
func TestRecordWholePrefetchOutsideStreams(t *testing.T) {
	testcvar.Set(t, "rings_prefetch_whole_record_bytes", "1024")
	_, a, ra := newRecordPair(t, false, 1<<16)
	_, b, rb := newRecordPair(t, false, 1<<16)
	if a.whole != 1024 {
		t.Fatalf("whole-record prefetch from %d bytes, want 1024", a.whole)
	}
	const big = 2000
	a.SetPrefetch(false)
	if a.fastMax >= big {
		t.Fatalf("outside a stream a %d-byte payload goes in line (fastMax %d): it would not be prefetched whole", big, a.fastMax)
	}
	a.SetPrefetch(true)
	if a.fastMax < big {
		t.Fatalf("in a stream a %d-byte payload goes the long way (fastMax %d)", big, a.fastMax)
	}
	rec := make([]byte, 16+big)
	var got uint64
	drain := func() { // both rings the same, and a's records intact
		t.Helper()
		if !bytes.Equal(unsafe.Slice((*byte)(a.data), a.capacity), unsafe.Slice((*byte)(b.data), b.capacity)) {
			t.Fatal("the rings' bytes differ")
		}
		k := 0
		for ; ; k++ {
			p, err := ra.Next(64)
			if err != nil {
				t.Fatal(err)
			}
			if p == nil {
				break
			}
			n := int(got*197) % (big + 1)
			if len(p) != 16+n || binary.LittleEndian.Uint64(p) != got || !checkPattern(p[16:], got) {
				t.Fatalf("record %d: %d bytes, want %d", got, len(p), 16+n)
			}
			if q, err := rb.Next(64); err != nil || !bytes.Equal(p, q) {
				t.Fatalf("record %d differs from TryWrite's (%v)", got, err)
			}
			got++
		}
		ra.Release(k)
		rb.Release(k)
	}
	for i := uint64(0); i < 300; i++ {
		a.SetPrefetch(i/3%2 == 0)
		n := int(i*197) % (big + 1)
		binary.LittleEndian.PutUint64(rec, i)
		binary.LittleEndian.PutUint64(rec[8:], ^i)
		pattern(rec[16:16+n], i)
		if err := a.TryWriteWords(1, i, ^i, rec[16:16+n]); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		if err := b.TryWrite(1, rec[:16+n]); err != nil {
			t.Fatal(err)
		}
		if a.tail != b.tail {
			t.Fatalf("record %d of %d bytes ends at %d, TryWrite's at %d", i, 16+n, a.tail, b.tail)
		}
		if i%8 == 7 { // before the ring fills
			drain()
		}
	}
	drain()
	if got != 300 {
		t.Fatalf("%d records read, want 300", got)
	}
}

// TestRecordReady checks that Ready says whether Next has something to
// read, at the head and after records Next or Peek handed out, padding
// included.
func TestRecordReady(t *testing.T) {
	_, w, rd := newRecordPair(t, false, 1024)
	if rd.Ready() {
		t.Fatal("ready on an empty ring")
	}
	for _, n := range []int{8, 100} {
		if err := w.TryWrite(1, make([]byte, n)); err != nil {
			t.Fatal(err)
		}
	}
	if !rd.Ready() {
		t.Fatal("not ready with two records published")
	}
	if p, err := rd.Next(8); err != nil || len(p) != 8 {
		t.Fatalf("first record: %d bytes, %v", len(p), err)
	}
	if !rd.Ready() {
		t.Fatal("not ready with the second record after the one handed out")
	}
	if p, err := rd.Next(8); err != nil || len(p) != 100 {
		t.Fatalf("second record: %d bytes, %v", len(p), err)
	}
	if rd.Ready() {
		t.Fatal("ready after every record was handed out")
	}
	rd.Release(2)
	if rd.Ready() {
		t.Fatal("ready after the release of every record")
	}
	// Three laps of records that do not divide the ring: the padding
	// before one that wraps counts as something to read.
	for i := 0; i < 30; i++ {
		if err := w.TryWrite(1, make([]byte, 100)); err != nil {
			t.Fatal(err)
		}
		if !rd.Ready() {
			t.Fatalf("record %d: not ready", i)
		}
		if p, err := rd.Next(8); err != nil || len(p) != 100 {
			t.Fatalf("record %d: %d bytes, %v", i, len(p), err)
		}
		rd.Release(1)
		if rd.Ready() {
			t.Fatalf("record %d: ready after its release", i)
		}
	}
}

// TestRoomWanted: a writer's WantRoom is reported once by the reader's
// next RoomWanted, whatever happened in between, also to a reader that
// attached after it; with many writers each request counts. The word
// lies apart from the hot head and tail lines.
func TestRoomWanted(t *testing.T) {
	if offRoomWanted/CacheLine == offTail/CacheLine || offRoomWanted/CacheLine == offHead/CacheLine {
		t.Fatal("requests for room share a line with the head or the tail")
	}
	forKinds(t, func(t *testing.T, multi bool) {
		r, w, rd := newRecordPair(t, multi, 1024)
		if rd.RoomWanted() {
			t.Fatal("RoomWanted on a new ring")
		}
		n := 0
		for ; w.TryWrite(1, make([]byte, 100)) == nil; n++ {
		}
		w.WantRoom()
		if k, err := rd.Poll(func(uint32, []byte) {}, n); k != n || err != nil {
			t.Fatalf("Poll: %d, %v; want %d", k, err, n)
		}
		if !rd.RoomWanted() {
			t.Fatal("WantRoom not reported after a Release")
		}
		if rd.RoomWanted() {
			t.Fatal("one WantRoom reported twice")
		}
		w.WantRoom()
		w.WantRoom()
		if !rd.RoomWanted() || rd.RoomWanted() {
			t.Fatal("two requests since the last call: want one true, then false")
		}
		if multi {
			w2, err := r.Writer()
			if err != nil {
				t.Fatal(err)
			}
			w2.WantRoom()
			if !rd.RoomWanted() {
				t.Fatal("a second writer's WantRoom not reported")
			}
		}
	})
	r, err := NewRecordRing(AlignedBytes(RecordRingSize(1024)), 1024)
	if err != nil {
		t.Fatal(err)
	}
	w, err := r.Writer()
	if err != nil {
		t.Fatal(err)
	}
	w.WantRoom()
	rd, err := r.Reader()
	if err != nil {
		t.Fatal(err)
	}
	if !rd.RoomWanted() || rd.RoomWanted() {
		t.Fatal("a reader attached after WantRoom: want true once, then false")
	}
}

// TestNextLine: in a stream of writes, the line TryWriteWords prefetches
// (nextLine, one compare with the position where the next is due) is
// the one the rule names for each write: the line the prefetch
// distance past the new tail, once that distance enters a new line, and
// only if the reader has released it. Off, it prefetches nothing.
func TestNextLine(t *testing.T) {
	const capacity = 1 << 12
	_, w, _ := newRecordPair(t, false, capacity)
	w.ahead = 256
	w.SetPrefetch(true)
	w.nextLine() // the first write after SetPrefetch prefetches at once
	rng := rand.New(rand.NewPCG(1, 2))
	prefetched := 0
	for i := range 20000 {
		t0 := w.tail
		w.tail += 8 * (1 + rng.Uint64N(24))                       // records of 8 to 192 bytes
		w.headCache = w.tail - min(w.tail, rng.Uint64N(capacity)) // the reader somewhere behind
		var want unsafe.Pointer                                   // the rule: the line at tail+ahead, if the write entered it, and the reader released it
		if at := w.tail + w.ahead; (t0+w.ahead)/CacheLine != at/CacheLine && at+CacheLine-w.headCache <= w.capacity {
			want = unsafe.Add(w.data, at&w.mask&^(CacheLine-1))
		}
		if got := w.nextLine(); got != want {
			t.Fatalf("write %d (tail %d to %d, head %d): nextLine %p, the rule %p", i, t0, w.tail, w.headCache, got, want)
		}
		if want != nil {
			prefetched++
		}
	}
	if prefetched == 0 {
		t.Fatal("no write prefetched")
	}
	w.SetPrefetch(false)
	w.tail += 4096
	if p := w.nextLine(); p != nil {
		t.Fatalf("prefetch off: nextLine %p", p)
	}
}
