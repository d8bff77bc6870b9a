package nic

import (
	"bytes"
	"errors"
	"io"
	"net/netip"
	"testing"
	"time"
)

// streamPair dials a stream to a listener on loopback and accepts it.
func streamPair(t *testing.T) (w, r *Stream, ln *StreamListener) {
	t.Helper()
	ln, err := ListenStream(netip.MustParseAddr("127.0.0.1"), 0)
	if err != nil {
		t.Fatal(err)
	}
	if ln.Port() == 0 {
		t.Fatal("no port")
	}
	if s, err := ln.Accept(); s != nil || err != nil {
		t.Fatalf("Accept with nothing dialed: %v, %v", s, err)
	}
	w, err = DialStream(netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), ln.Port()))
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for r == nil {
		if r, err = ln.Accept(); err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatal("the dialed stream never came")
		}
	}
	t.Cleanup(func() { w.Close(); r.Close(); ln.Close() })
	return w, r, ln
}

// TestStream: a header and 4 MiB written in non-blocking pieces arrive
// whole and in order, read in non-blocking pieces, although the reader's
// low water is above what comes at a time; an empty Read is no end; the
// writer's Close is io.EOF after the last byte; calls after Close fail.
func TestStream(t *testing.T) {
	w, r, ln := streamPair(t)
	if err := r.SetReadLowWater(8 << 20); err != nil {
		t.Fatal(err)
	}
	hdr := []byte("header!!")
	data := make([]byte, 4<<20)
	for i := range data {
		data[i] = byte(i * 7)
	}
	want := append(append([]byte{}, hdr...), data...)
	got := make([]byte, 0, len(want))
	buf := make([]byte, 100000)
	sent := 0
	deadline := time.Now().Add(20 * time.Second)
	for len(got) < len(want) {
		if sent < len(want) {
			var a []byte
			if sent < len(hdr) {
				a = hdr[sent:]
			}
			k, err := w.Write(a, data[max(sent-len(hdr), 0):])
			if err != nil {
				t.Fatal(err)
			}
			sent += k
		}
		k, err := r.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, buf[:k]...)
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d bytes written, %d read", sent, len(want), len(got))
		}
	}
	if !bytes.Equal(got, want) {
		t.Fatal("the bytes read differ from those written")
	}
	if k, err := r.Read(buf); k != 0 || err != nil {
		t.Fatalf("Read with nothing come: %d, %v", k, err)
	}
	if k, err := w.Write(nil, nil); k != 0 || err != nil {
		t.Fatalf("Write of nothing: %d, %v", k, err)
	}
	w.Close()
	for {
		k, err := r.Read(buf)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil || k != 0 {
			t.Fatalf("Read after the writer closed: %d, %v", k, err)
		}
		if time.Now().After(deadline) {
			t.Fatal("no end after the writer closed")
		}
	}
	if err := w.Close(); !errors.Is(err, ErrClosed) {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := w.Write(hdr, nil); err == nil {
		t.Fatal("Write after Close succeeded")
	}
	ln.Close()
	if err := ln.Close(); !errors.Is(err, ErrClosed) {
		t.Fatalf("second listener Close: %v", err)
	}
}

// TestStreamRefused: a stream dialed to a port nobody listens on fails
// its writes with ErrStreamLost, never blocks.
func TestStreamRefused(t *testing.T) {
	ln, err := ListenStream(netip.MustParseAddr("127.0.0.1"), 0)
	if err != nil {
		t.Fatal(err)
	}
	to := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), ln.Port())
	ln.Close()
	s, err := DialStream(to)
	if errors.Is(err, ErrStreamLost) {
		return // refused at once
	}
	if err != nil {
		t.Fatalf("DialStream: %v, want ErrStreamLost or none", err)
	}
	defer s.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err := s.Write([]byte("x"), nil)
		if errors.Is(err, ErrStreamLost) {
			return
		}
		if err != nil {
			t.Fatalf("Write: %v, want ErrStreamLost", err)
		}
		if time.Now().After(deadline) {
			t.Fatal("writes to a refused stream never failed")
		}
	}
}

// TestStreamNoAlloc: Write and Read allocate nothing.
func TestStreamNoAlloc(t *testing.T) {
	w, r, _ := streamPair(t)
	a, b := make([]byte, 16), make([]byte, 1000)
	buf := make([]byte, 2000)
	if n := testing.AllocsPerRun(1000, func() {
		if _, err := w.Write(a, b); err != nil {
			t.Fatal(err)
		}
		if _, err := r.Read(buf); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Fatalf("%v allocations a write and read", n)
	}
}

// TestStreamBacklog: a listener sized for 300 peers holds the streams they
// all dial at once, none accepted yet, and hands them all over at once
// after; at the old fixed 128 the rest wait a second or more for the
// handshake's retry. A closed listener's Accept is its end, not
// ErrStreamBusy.
func TestStreamBacklog(t *testing.T) {
	const peers = 300
	ln, err := ListenStream(netip.MustParseAddr("127.0.0.1"), peers)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	to := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), ln.Port())
	var dialed, accepted []*Stream
	defer func() {
		for _, s := range append(dialed, accepted...) {
			s.Close()
		}
	}()
	for range peers {
		s, err := DialStream(to)
		if err != nil {
			t.Fatal(err)
		}
		dialed = append(dialed, s)
	}
	time.Sleep(200 * time.Millisecond) // the handshakes, done by the kernel
	deadline := time.Now().Add(500 * time.Millisecond)
	for len(accepted) < peers && time.Now().Before(deadline) {
		s, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		if s != nil {
			accepted = append(accepted, s)
		}
	}
	if len(accepted) < peers {
		t.Fatalf("%d of %d dialed streams accepted within 0.7 s", len(accepted), peers)
	}
	ln.Close()
	if s, err := ln.Accept(); s != nil || err == nil || errors.Is(err, ErrStreamBusy) {
		t.Fatalf("Accept on a closed listener: %v, %v", s, err)
	}
}
