package pvar

import (
	"math"
	"testing"

	"github.com/tachyon-hpc/tachyon/internal/testname"
)

func TestOwnerReads(t *testing.T) {
	c := NewCounter(testname.Uniq("test_owned_counter"), "x", WithBind(BindComm))
	l := NewLevel(testname.Uniq("test_owned_level"), "x")
	h := NewHighWatermark(testname.Uniq("test_owned_hwm"), "x", WithLevel(l.Var))
	o1, o2 := NewOwner(), NewOwner()
	c1, c2, c0 := c.ShardOf(o1), c.ShardOf(o2), c.Shard()
	l1, l2 := l.ShardOf(o1), l.ShardOf(o2)
	h1, h2 := h.ShardOf(o1), h.ShardOf(o2)
	c1.Add(3)
	c2.Add(5)
	c0.Add(100)
	c.Add(1000)
	l1.Set(4)
	l2.Set(9)
	h1.Observe(4)
	h2.Observe(9)
	if c.Bind() != BindComm || l.Bind() != BindNoObject {
		t.Fatalf("binds %v %v", c.Bind(), l.Bind())
	}
	for _, tc := range []struct {
		v    *Var
		k    Key
		want int64
	}{
		{c.Var, Key{}, 1108}, {c.Var, Key{Owner: o1}, 3}, {c.Var, Key{Owner: o2}, 5},
		{l.Var, Key{}, 13}, {l.Var, Key{Owner: o1}, 4}, {l.Var, Key{Owner: o2}, 9},
		{h.Var, Key{}, 9}, {h.Var, Key{Owner: o1}, 4}, {h.Var, Key{Owner: o2}, 9},
		{c.Var, Key{Owner: NewOwner()}, 0},
	} {
		if got := tc.v.ReadAt(tc.k); got != tc.want {
			t.Errorf("%s.ReadAt(%v) = %d, want %d", tc.v.Name(), tc.k.Owner, got, tc.want)
		}
	}
	// Closed shards stay in their owner's count and watermark.
	c1.Close()
	h1.Close()
	c1.Add(50) // after Close: not counted
	if got := c.ValueOf(o1); got != 3 {
		t.Errorf("o1's count after Close = %d, want 3", got)
	}
	if got := h.ValueOf(o1); got != 4 {
		t.Errorf("o1's watermark after Close = %d, want 4", got)
	}
	if got := c.Value(); got != 1108 {
		t.Errorf("count after Close = %d, want 1108", got)
	}
}

func TestWindows(t *testing.T) {
	l := NewLevel(testname.Uniq("test_win_level"), "x")
	h := NewHighWatermark(testname.Uniq("test_win_hwm"), "x", WithLevel(l.Var))
	o1, o2 := NewOwner(), NewOwner()
	s1, s2 := h.ShardOf(o1), h.ShardOf(o2)
	ls := l.ShardOf(o1)
	s1.Observe(50) // before any window: not in windows
	ls.Set(2)
	wAll, ok := h.OpenWindow(Key{})
	if !ok {
		t.Fatal("OpenWindow failed")
	}
	w1, _ := h.OpenWindow(Key{Owner: o1})
	if got := wAll.Value(); got != 2 {
		t.Errorf("new window = %d, want the level 2", got)
	}
	s1.Observe(7)
	s2.Observe(11)
	if got := wAll.Value(); got != 11 {
		t.Errorf("window of all = %d, want 11", got)
	}
	if got := w1.Value(); got != 7 {
		t.Errorf("window of o1 = %d, want 7", got)
	}
	// A later window does not see what came before it; a reset forgets.
	w2, _ := h.OpenWindow(Key{})
	s1.Observe(5)
	if got := w2.Value(); got != 5 {
		t.Errorf("later window = %d, want 5", got)
	}
	ls.Set(1)
	wAll.Reset()
	if got := wAll.Value(); got != 1 {
		t.Errorf("reset window = %d, want 1", got)
	}
	if got := w1.Value(); got != 7 {
		t.Errorf("o1's window after another's reset = %d, want 7", got)
	}
	// A shard made while a window is open, then closed, stays in it.
	s3 := h.ShardOf(o1)
	s3.Observe(30)
	s3.Close()
	if got, got1 := wAll.Value(), w1.Value(); got != 30 || got1 != 30 {
		t.Errorf("windows after a closed shard = %d, %d, want 30, 30", got, got1)
	}
	h.Observe(40) // the shared path: every owner-less window
	if got, got1 := wAll.Value(), w1.Value(); got != 40 || got1 != 30 {
		t.Errorf("windows after Observe = %d, %d, want 40, 30", got, got1)
	}
	if h.Value() != 50 {
		t.Errorf("lifetime mark = %d, want 50", h.Value())
	}
	// At most Windows open at once; Close frees a slot.
	open := []*Window{wAll, w1, w2}
	for len(open) < Windows {
		w, ok := h.OpenWindow(Key{})
		if !ok {
			t.Fatalf("OpenWindow %d failed", len(open))
		}
		open = append(open, w)
	}
	if _, ok := h.OpenWindow(Key{}); ok {
		t.Fatal("a window beyond Windows opened")
	}
	w2.Close()
	w2.Close()
	if w2.Value() != 0 {
		t.Error("closed window reads non-zero")
	}
	if _, ok := h.OpenWindow(Key{}); !ok {
		t.Fatal("no window after Close")
	}
}

func TestWatermarkAllocs(t *testing.T) {
	h := NewHighWatermark(testname.Uniq("test_win_allocs"), "x")
	s := h.ShardOf(NewOwner())
	n := int64(0)
	if a := testing.AllocsPerRun(1000, func() { n++; s.Observe(n) }); a != 0 {
		t.Fatalf("Observe allocates %v times", a)
	}
	w, _ := h.OpenWindow(Key{})
	defer w.Close()
	if a := testing.AllocsPerRun(1000, func() { n++; s.Observe(n) }); a != 0 {
		t.Fatalf("Observe with a window open allocates %v times", a)
	}
	if w.Value() != n {
		t.Fatalf("window = %d, want %d", w.Value(), n)
	}
}

func BenchmarkWatermarkObserve(b *testing.B) {
	s := NewHighWatermark(testname.Uniq("bench_hwm"), "x").Shard()
	n := int64(0)
	for b.Loop() {
		n++
		s.Observe(n & 63)
	}
}

func TestLowWatermark(t *testing.T) {
	l := NewLevel(testname.Uniq("test_low_level"), "x")
	lw := NewLowWatermark(testname.Uniq("test_low"), "x", WithLevel(l.Var))
	if lw.Class() != ClassLowWatermark || lw.Watermark() == nil {
		t.Fatalf("class %v, windows %v", lw.Class(), lw.Watermark())
	}
	if v := lw.Value(); v != math.MaxInt64 {
		t.Fatalf("nothing observed: %d, want MaxInt64", v)
	}
	o1, o2 := NewOwner(), NewOwner()
	s1, s2 := lw.ShardOf(o1), lw.ShardOf(o2)
	ls := l.ShardOf(o1)
	s1.Observe(9)
	s2.Observe(6)
	lw.Observe(20)
	if v, v1, v2 := lw.Value(), lw.ValueOf(o1), lw.ReadAt(Key{Owner: o2}); v != 6 || v1 != 9 || v2 != 6 {
		t.Fatalf("low marks %d, %d, %d; want 6, 9, 6", v, v1, v2)
	}
	ls.Set(8)
	w, ok := lw.OpenWindow(Key{Owner: o1})
	if !ok {
		t.Fatal("OpenWindow failed")
	}
	if v := w.Value(); v != 8 {
		t.Fatalf("new window = %d, want the level 8", v)
	}
	s1.Observe(12)
	s2.Observe(1) // another owner's
	if v := w.Value(); v != 8 {
		t.Fatalf("window after 12 and another's 1 = %d, want 8", v)
	}
	s1.Observe(3)
	if v := w.Value(); v != 3 {
		t.Fatalf("window after 3 = %d, want 3", v)
	}
	s1.Observe(-5) // taken as zero
	if v := w.Value(); v != 0 {
		t.Fatalf("window after -5 = %d, want 0", v)
	}
	ls.Set(4)
	w.Reset()
	if v := w.Value(); v != 4 {
		t.Fatalf("reset window = %d, want the level 4", v)
	}
	s1.Close()
	if v := lw.ValueOf(o1); v != 0 {
		t.Fatalf("o1's low mark after Close = %d, want 0", v)
	}
	w.Close()
	if a := testing.AllocsPerRun(1000, func() { s2.Observe(5) }); a != 0 {
		t.Fatalf("Observe allocates %v times", a)
	}
}
