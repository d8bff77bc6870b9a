package rings

import (
	"testing"
)

// TestRecordPeekWrap sends records of every size through a small ring
// with claims sized for the largest record and shrunk by CommitLen, and
// reads them with Peek/Record/Release in batches of varying size, so that
// padding and shrunk claims meet the wrap at every offset.
func TestRecordPeekWrap(t *testing.T) {
	r, w, rd := newRecordPair(t, false, 1024)
	max := r.MaxPayload()
	var got, sent uint64
	for sent < 20000 {
		p, err := w.Claim(max)
		if err == ErrFull {
			k, err := rd.Peek(int(got%5) + 1)
			if k == 0 || err != nil {
				t.Fatalf("full ring, Peek = %d, %v", k, err)
			}
			for i := range k {
				m := rd.Record(i)
				if len(m) != int(got%121) || !checkPattern(m, got) {
					t.Fatalf("record %d: %d bytes %v", got, len(m), m)
				}
				got++
			}
			if rd.Record(k) != nil {
				t.Fatal("Record beyond the peek")
			}
			rd.Release(k)
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		n := int(sent % 121)
		pattern(p[:n], sent)
		if err := w.CommitLen(1, n); err != nil {
			t.Fatal(err)
		}
		sent++
	}
	for got < sent {
		k, err := rd.Peek(64)
		if k == 0 || err != nil {
			t.Fatalf("drain: %d %v", k, err)
		}
		for i := range k {
			if m := rd.Record(i); len(m) != int(got%121) || !checkPattern(m, got) {
				t.Fatalf("record %d: %d bytes", got, len(m))
			}
			got++
		}
		rd.Release(k)
	}
	if k, err := rd.Peek(64); k != 0 || err != nil {
		t.Fatalf("empty ring: Peek = %d, %v", k, err)
	}
}

// TestRecordPeekPartialRelease: records peeked but not released are
// found again by the next Peek.
func TestRecordPeekPartialRelease(t *testing.T) {
	_, w, rd := newRecordPair(t, false, 1024)
	for _, s := range []string{"a", "bb", "ccc"} {
		if err := w.TryWrite(1, []byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	if k, _ := rd.Peek(10); k != 3 {
		t.Fatalf("Peek found %d", k)
	}
	rd.Release(1)
	if k, _ := rd.Peek(10); k != 2 || string(rd.Record(0)) != "bb" || string(rd.Record(1)) != "ccc" {
		t.Fatalf("after releasing one: %d %q", k, rd.Record(0))
	}
	rd.Release(0)
	if k, _ := rd.Peek(1); k != 1 || string(rd.Record(0)) != "bb" {
		t.Fatal("a Release of 0 consumed something")
	}
}

func TestRecordCommitLenErrors(t *testing.T) {
	_, w, _ := newRecordPair(t, false, 1024)
	if err := w.CommitLen(1, 0); err != ErrInvalid {
		t.Fatalf("CommitLen without a claim: %v", err)
	}
	if _, err := w.Claim(10); err != nil {
		t.Fatal(err)
	}
	if err := w.CommitLen(1, 11); err != ErrInvalid {
		t.Fatalf("CommitLen beyond the claim: %v", err)
	}
	if err := w.CommitLen(MaxRecordType+1, 5); err != ErrInvalid {
		t.Fatalf("CommitLen with the padding type: %v", err)
	}
	if err := w.CommitLen(1, 5); err != nil {
		t.Fatal(err)
	}
	_, mw, mrd := newRecordPair(t, true, 1024)
	if _, err := mw.Claim(10); err != nil {
		t.Fatal(err)
	}
	if err := mw.CommitLen(1, 5); err != ErrInvalid {
		t.Fatalf("many-to-one CommitLen shrinking: %v", err)
	}
	if err := mw.CommitLen(1, 10); err != nil {
		t.Fatal(err)
	}
	if _, err := mrd.Peek(1); err != ErrInvalid {
		t.Fatalf("Peek on a many-to-one ring: %v", err)
	}
}

// TestRecordPeekMalformed: a corrupt length at the head is dropped and
// reported; one behind good records ends the batch and is reported next.
func TestRecordPeekMalformed(t *testing.T) {
	_, w, rd := newRecordPair(t, false, 1024)
	w.TryWrite(1, []byte("first"))
	w.TryWrite(1, []byte("second"))
	w.TryWrite(1, []byte("third"))
	hp := rd.hdr(16)
	*hp = *hp&^0xffffffff | 5000
	before := pvMalformed.Value()
	if k, err := rd.Peek(10); k != 1 || err != nil || string(rd.Record(0)) != "first" {
		t.Fatalf("Peek = %d %v", k, err)
	}
	rd.Release(1)
	if k, err := rd.Peek(10); k != 0 || err != ErrCorrupt {
		t.Fatalf("Peek at the corrupt record = %d %v", k, err)
	}
	if pvMalformed.Value()-before != 1 {
		t.Fatal("not counted")
	}
	w.TryWrite(1, []byte("fourth"))
	if k, err := rd.Peek(10); k != 1 || err != nil || string(rd.Record(0)) != "fourth" {
		t.Fatalf("after the drop: %d %v", k, err)
	}
}

// TestRecordPeekPaddingOnly: when the only ready thing is padding (the
// rest of the buffer before a wrap, an aborted claim), Peek consumes it,
// so a writer waiting for that space can go on (it deadlocked an engine
// whose reader found only padding).
func TestRecordPeekPaddingOnly(t *testing.T) {
	_, w, rd := newRecordPair(t, false, 1024)
	for _, n := range []int{120, 120, 120, 120, 120, 120, 120, 100} { // 7*128 + 112 = 1008
		if err := w.TryWrite(1, make([]byte, n)); err != nil {
			t.Fatal(err)
		}
	}
	k, _ := rd.Peek(10)
	rd.Release(k)
	if _, err := w.Claim(50); err != nil { // pads the last 16 bytes, lands at 0
		t.Fatal(err)
	}
	w.Abort() // the claim becomes padding too
	if k, err := rd.Peek(10); k != 0 || err != nil {
		t.Fatalf("Peek over padding and an aborted claim: %d %v", k, err)
	}
	if got, want := rd.head, w.tail; got != want {
		t.Fatalf("reader head %d, writer tail %d: padding left unconsumed", got, want)
	}
	if err := w.TryWrite(1, []byte("after")); err != nil {
		t.Fatal(err)
	}
	if k, _ := rd.Peek(10); k != 1 || string(rd.Record(0)) != "after" {
		t.Fatal("the record after the padding is lost")
	}
}

// TestRecordPeekGoroutines streams records of random sizes between two
// goroutines through a small ring, the reader peeking in batches and
// releasing all, some or none of each, as an engine's inbox does. (A
// Peek over a full ring once came round to its own batch's first record.)
func TestRecordPeekGoroutines(t *testing.T) {
	r, w, rd := newRecordPair(t, false, 4096)
	const n = 200000
	max := r.MaxPayload()
	done := make(chan error, 1)
	go func() {
		seed := uint64(1)
		for i := uint64(0); i < n; {
			seed = seed*6364136223846793005 + 1442695040888963407
			size := 8 + int(seed>>33)%(max-7)
			p, err := w.Claim(size)
			if err == ErrFull {
				continue
			}
			if err != nil {
				done <- err
				return
			}
			copy(p, []byte{byte(i), byte(i >> 8), byte(i >> 16), byte(i >> 24)})
			if err := w.CommitLen(1, size); err != nil {
				done <- err
				return
			}
			i++
		}
		done <- nil
	}()
	var got uint64
	for step := 0; got < n; step++ {
		k, err := rd.Peek(1 + step%40)
		if err != nil {
			t.Fatal(err)
		}
		keep := k
		switch step % 7 {
		case 3:
			keep = k / 2
		case 5:
			keep = 0
		}
		for j := range keep {
			p := rd.Record(j)
			id := uint64(p[0]) | uint64(p[1])<<8 | uint64(p[2])<<16 | uint64(p[3])<<24
			if id != got&0xffffffff || len(p) < 8 {
				t.Fatalf("record %d: id %d, %d bytes (peeked %d, at %d)", got, id, len(p), k, j)
			}
			got++
		}
		rd.Release(keep)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
