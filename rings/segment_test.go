package rings

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

func TestSegmentRegions(t *testing.T) {
	size := SegmentSize(CellRingSize(8, 64), RecordRingSize(1024), MPSCRingSize(1024), 100)
	s := newTestSegment(t, size)
	ci, cr, err := s.NewCellRing(8, 64)
	if err != nil {
		t.Fatal(err)
	}
	ri, _, err := s.NewRecordRing(1024)
	if err != nil {
		t.Fatal(err)
	}
	mi, _, err := s.NewMPSCRing(1024)
	if err != nil {
		t.Fatal(err)
	}
	xi, raw, err := s.NewRegion(100)
	if err != nil || len(raw) != 100 {
		t.Fatal(err, len(raw))
	}
	if _, _, err := s.NewRegion(s.Size()); !errors.Is(err, ErrInvalid) {
		t.Fatalf("region past the end: %v", err)
	}
	p, _ := cr.Producer()
	p.TrySend([]byte("hello"))
	raw[99] = 42

	o, err := OpenSegment(s.Name())
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	if o.Regions() != 4 || o.CreatorPID() != os.Getpid() || o.Size() != s.Size() {
		t.Fatalf("opened: %d regions, creator %d, size %d", o.Regions(), o.CreatorPID(), o.Size())
	}
	oc, err := o.CellRing(ci)
	if err != nil {
		t.Fatal(err)
	}
	c, err := oc.Consumer()
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	if n, err := c.TryRecv(buf); err != nil || string(buf[:n]) != "hello" {
		t.Fatalf("through the second mapping: %q %v", buf[:n], err)
	}
	if r, err := o.RecordRing(ri); err != nil || r.Kind() != KindRecordRing {
		t.Fatal(err)
	}
	if r, err := o.RecordRing(mi); err != nil || r.Kind() != KindMPSCRing {
		t.Fatal(err)
	}
	if b, err := o.Region(xi); err != nil || b[99] != 42 {
		t.Fatal(err)
	}
	if _, err := o.CellRing(ri); !errors.Is(err, ErrBadSegment) {
		t.Fatalf("record ring as cell ring: %v", err)
	}
	if _, err := o.Region(7); !errors.Is(err, ErrInvalid) {
		t.Fatalf("missing region: %v", err)
	}
	if _, _, err := o.NewRegion(64); !errors.Is(err, ErrInvalid) {
		t.Fatalf("opener carved a region: %v", err)
	}
}

func TestSegmentMemfd(t *testing.T) {
	s, err := CreateMemfdSegment("test", SegmentSize(CellRingSize(4, 64)))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	i, _, err := s.NewCellRing(4, 64)
	if err != nil {
		t.Fatal(err)
	}
	f, err := s.File()
	if err != nil {
		t.Fatal(err)
	}
	o, err := OpenSegmentFile(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	if _, err := o.CellRing(i); err != nil {
		t.Fatal(err)
	}
	if err := s.Remove(); err != nil {
		t.Fatal(err)
	}
}

func TestSegmentExistsAndStale(t *testing.T) {
	name := testName()
	s, err := CreateSegment(name, SegmentSize(64))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Remove()
	if _, err := CreateSegment(name, SegmentSize(64)); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("create over a live segment: %v", err)
	}
	prefix := name[:len(name)-1]
	if n, err := RemoveStale(name); n != 0 || err != nil {
		t.Fatalf("RemoveStale of a held segment: %d %v", n, err)
	}
	// Closing without Remove leaves the file held by nobody: stale.
	s.Close()
	before := pvStale.Value()
	s2, err := CreateSegment(name, SegmentSize(64))
	if err != nil {
		t.Fatalf("create over a stale segment: %v", err)
	}
	if pvStale.Value()-before != 1 {
		t.Fatal("stale segment not counted")
	}
	s2.Close()
	// A leftover temporary file and a stale segment, and a file that is
	// not a segment, under the prefix.
	dir := shmDir.Get()
	tmp := filepath.Join(dir, "."+name+".tmp.1.1")
	other := filepath.Join(dir, name+"-other")
	os.WriteFile(tmp, nil, 0o600)
	os.WriteFile(other, []byte("not a segment"), 0o600)
	defer os.Remove(other)
	defer os.Remove(tmp)
	n, err := RemoveStale(prefix)
	if err != nil || n != 2 {
		t.Fatalf("RemoveStale = %d, %v; want 2", n, err)
	}
	if _, err := os.Stat(other); err != nil {
		t.Fatal("removed a file that is not a segment")
	}
	if _, err := OpenSegment(name); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("open removed segment: %v", err)
	}
	if _, err := RemoveStale(""); !errors.Is(err, ErrInvalid) {
		t.Fatalf("empty prefix: %v", err)
	}
}

// TestSegmentCreateWhileRemovingStale creates segments while another
// goroutine removes stale ones under the same prefix, as a listener does
// for each connection it accepts: a segment being made is never taken
// for a stale one.
func TestSegmentCreateWhileRemovingStale(t *testing.T) {
	prefix := testName()
	stop := make(chan struct{})
	var sweeps sync.WaitGroup
	sweeps.Add(1)
	go func() {
		defer sweeps.Done()
		for {
			select {
			case <-stop:
				return
			default:
				RemoveStale(prefix)
			}
		}
	}()
	defer func() { close(stop); sweeps.Wait() }()
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 300 {
				s, err := CreateSegment(fmt.Sprintf("%s-%d-%d", prefix, g, i), SegmentSize(64))
				if err != nil {
					t.Error(err)
					return
				}
				s.Remove()
				s.Close()
			}
		}()
	}
	wg.Wait()
}

func TestSegmentCorrupt(t *testing.T) {
	dir := shmDir.Get()
	cases := map[string]func(b []byte) []byte{
		"short":    func(b []byte) []byte { return b[:100] },
		"magic":    func(b []byte) []byte { b[0] = 'X'; return b },
		"version":  func(b []byte) []byte { b[offSegVersion] = 9; return b },
		"size":     func(b []byte) []byte { b[offSegSize] ^= 0x40; return b },
		"truncate": func(b []byte) []byte { return b[:len(b)-4096] },
		"count":    func(b []byte) []byte { b[offSegCount] = 200; return b },
		"region":   func(b []byte) []byte { b[offSegTable+16+3] = 0x7f; return b },
		"overlap": func(b []byte) []byte {
			b[offSegTable+regionEntrySize+8] = 0
			b[offSegTable+regionEntrySize+9] = 0x10
			return b
		},
		"kind": func(b []byte) []byte { b[offSegTable] = 9; return b },
	}
	for name, corrupt := range cases {
		t.Run(name, func(t *testing.T) {
			s := newTestSegment(t, SegmentSize(1000, 1000))
			s.NewRegion(1000)
			s.NewRegion(1000)
			path := filepath.Join(dir, s.Name())
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			b = corrupt(b)
			if err := os.WriteFile(path, b, 0o600); err != nil {
				t.Fatal(err)
			}
			before := pvRejected.Value()
			o, err := OpenSegment(s.Name())
			if !errors.Is(err, ErrBadSegment) {
				if o != nil {
					o.Close()
				}
				t.Fatalf("open corrupt segment: %v", err)
			}
			if pvRejected.Value()-before != 1 {
				t.Fatal("not counted")
			}
		})
	}
}

func TestSegmentArgs(t *testing.T) {
	for _, name := range []string{"", ".hidden", "a/b", "sp ace", string(make([]byte, 300))} {
		if _, err := CreateSegment(name, SegmentSize(64)); !errors.Is(err, ErrInvalid) {
			t.Errorf("name %q: %v", name, err)
		}
	}
	if _, err := CreateSegment(testName(), 100); !errors.Is(err, ErrInvalid) {
		t.Errorf("tiny segment: %v", err)
	}
	if _, err := OpenSegment(testName()); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("open missing: %v", err)
	}
	s := newTestSegment(t, SegmentSize(64))
	s.Close()
	if err := s.Close(); err != ErrClosed {
		t.Errorf("second close: %v", err)
	}
	if _, _, err := s.NewRegion(64); err != ErrClosed {
		t.Errorf("carve after close: %v", err)
	}
	if _, err := s.Region(0); err != ErrClosed {
		t.Errorf("region after close: %v", err)
	}
}

// TestPrefault: prefaulting a ring, or part of a region, in the process
// that made the segment or in another mapping of it, leaves the contents
// as they were.
func TestPrefault(t *testing.T) {
	size := SegmentSize(RecordRingSize(4096), 5000)
	s := newTestSegment(t, size)
	ri, rr, err := s.NewRecordRing(4096)
	if err != nil {
		t.Fatal(err)
	}
	w, err := rr.Writer()
	if err != nil {
		t.Fatal(err)
	}
	if err := w.TryWrite(7, []byte("kept")); err != nil {
		t.Fatal(err)
	}
	xi, raw, err := s.NewRegion(5000)
	if err != nil {
		t.Fatal(err)
	}
	for i := range raw {
		raw[i] = byte(i * 7)
	}
	o, err := OpenSegment(s.Name())
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	for _, seg := range []*Segment{s, o} {
		for i, kind := range map[int]Kind{ri: KindRecordRing, xi: KindRaw} {
			mem, err := seg.region(i, kind)
			if err != nil {
				t.Fatal(err)
			}
			// A whole region, and a part starting mid-page.
			for _, m := range [][]byte{mem, mem[100:]} {
				if err := Prefault(m); err != nil {
					t.Fatalf("Prefault of region %d: %v", i, err)
				}
			}
		}
	}
	if err := Prefault(nil); err != nil {
		t.Fatal(err)
	}
	for i := range raw {
		if raw[i] != byte(i*7) {
			t.Fatalf("byte %d of the raw region changed", i)
		}
	}
	r, err := o.RecordRing(ri)
	if err != nil {
		t.Fatal(err)
	}
	rd, err := r.Reader()
	if err != nil {
		t.Fatal(err)
	}
	var got string
	if n, err := rd.Poll(func(typ uint32, p []byte) { got = fmt.Sprint(typ, string(p)) }, 8); n != 1 || err != nil || got != "7kept" {
		t.Fatalf("after Prefault: %d records, %v, %q", n, err, got)
	}
}
