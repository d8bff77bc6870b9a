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
