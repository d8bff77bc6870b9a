package pvar

import (
	"math"
	"math/bits"
	"sync/atomic"

	"github.com/tachyon-hpc/tachyon/asm"
)

// Windows is how many windows (OpenWindow) one high watermark keeps open at
// once.
const Windows = 8

// HighWatermark is the largest value a level has reached: since the start
// of the process (Value, ValueOf), and since the start of each open Window.
type HighWatermark struct {
	*Var
	shared    atomic.Int64
	retired   atomic.Int64
	set       shardSet[WatermarkShard]
	windows   [Windows]*Window // open windows by slot, under set.mu
	active    uint64           // slots of open windows, under set.mu
	sharedWin [Windows]atomic.Int64
	sharedAct atomic.Uint64 // active, for Observe
	low       bool          // a LowWatermark's: it marks lowBase less each value
}

// NewHighWatermark registers a high-watermark.
func NewHighWatermark(name, doc string, opts ...Option) *HighWatermark {
	h := &HighWatermark{}
	h.Var = register(name, doc, ClassHighWatermark, h.Value, func(k Key) int64 { return h.ValueOf(k.Owner) }, opts)
	h.Var.windows = h
	h.Var.split = h.split
	return h
}

// Observe records v from any goroutine.
func (h *HighWatermark) Observe(v int64) {
	storeMax(&h.shared, v)
	if m := h.sharedAct.Load(); m != 0 {
		for ; m != 0; m &= m - 1 {
			storeMax(&h.sharedWin[bits.TrailingZeros64(m)], v)
		}
	}
}

func storeMax(a *atomic.Int64, v int64) {
	for {
		old := a.Load()
		if v <= old || a.CompareAndSwap(old, v) {
			return
		}
	}
}

// Value returns the highest value observed.
func (h *HighWatermark) Value() int64 {
	h.set.mu.Lock()
	defer h.set.mu.Unlock()
	v := max(h.shared.Load(), h.retired.Load())
	h.set.each(func(s *WatermarkShard) { v = max(v, int64(asm.LoadAcquire64(&s.v))) })
	return v
}

// ValueOf returns the highest value o's shards observed, the closed ones
// included; for a nil o, Value.
func (h *HighWatermark) ValueOf(o *Owner) int64 {
	if o == nil {
		return h.Value()
	}
	h.set.mu.Lock()
	defer h.set.mu.Unlock()
	v := o.retiredOf(h.Var)
	h.set.each(func(s *WatermarkShard) {
		if s.owner == o {
			v = max(v, int64(asm.LoadAcquire64(&s.v)))
		}
	})
	return v
}

// Shard returns a new part of the watermark for one writer at a time, with
// no owner.
func (h *HighWatermark) Shard() *WatermarkShard { return h.ShardOf(nil) }

// ShardOf returns a new part of the watermark for one writer at a time,
// counted in o's value too (nil: no owner). It takes part in the windows
// open now.
func (h *HighWatermark) ShardOf(o *Owner) *WatermarkShard {
	return h.addShard(&WatermarkShard{of: h, owner: o})
}

// addShard adds s, which it joins to the windows open now.
func (h *HighWatermark) addShard(s *WatermarkShard) *WatermarkShard {
	h.set.mu.Lock()
	defer h.set.mu.Unlock()
	s.active = h.active
	h.set.addLocked(s)
	return s
}

// WatermarkShard is a part of a HighWatermark that one goroutine at a time
// updates without locked instructions. Its maximum stays after Close.
type WatermarkShard struct {
	_      pad
	v      uint64          // the maximum since the shard was made
	active uint64          // the watermark's open windows; written by their readers under the set's lock
	win    [Windows]uint64 // the maximum since each open window's start or reset (0 then)
	of     *HighWatermark  //
	owner  *Owner          // nil: counted in the process-wide value only
	_      pad
}

// Observe records v. While no window is open it costs a load, a compare
// and, if v is a new maximum, a plain store, all on the shard's own line;
// each open window adds a compare and perhaps a store.
func (s *WatermarkShard) Observe(v int64) {
	if v > int64(s.v) {
		asm.StoreRelaxed64(&s.v, uint64(v))
	}
	if m := asm.LoadRelaxed64(&s.active); m != 0 {
		s.observeWindows(m, v)
	}
}

// observeWindows records v in the windows of m, out of line.
func (s *WatermarkShard) observeWindows(m uint64, v int64) {
	for ; m != 0; m &= m - 1 {
		i := bits.TrailingZeros64(m)
		if v > int64(asm.LoadRelaxed64(&s.win[i])) {
			asm.StoreRelaxed64(&s.win[i], uint64(v))
		}
	}
}

// Close detaches the shard, keeping its maximum in the watermark's and its
// owner's, and in every open window's.
func (s *WatermarkShard) Close() {
	h := s.of
	h.set.remove(s, func() {
		v := int64(asm.LoadAcquire64(&s.v))
		storeMax(&h.retired, v)
		s.owner.retire(h.Var, v, true)
		for m := h.active; m != 0; m &= m - 1 {
			i := bits.TrailingZeros64(m)
			if w := h.windows[i]; w.key.Owner == nil || w.key.Owner == s.owner {
				w.retired = max(w.retired, int64(asm.LoadAcquire64(&s.win[i])))
			}
		}
	})
}

// Window is a high watermark's mark since a point a reader chose (its
// opening, or its last Reset), for one Key: the largest value observed by
// the shards the Key names (every shard for the zero Key) since then, and
// no less than the level when it started (WithLevel). A tool's session
// keeps one per handle, so that sessions' marks are independent. A
// Window's methods are safe for concurrent use.
type Window struct {
	h       *HighWatermark
	slot    int
	key     Key
	start   int64 // the level at the start, under h.set.mu
	retired int64 // maxima of shards closed since the start, under h.set.mu
	closed  bool  // under h.set.mu
}

// OpenWindow opens a window on h for the shards k names, starting now; it
// returns false if Windows windows are open on h already. Close frees it.
func (h *HighWatermark) OpenWindow(k Key) (*Window, bool) {
	start := h.startOf(k)
	h.set.mu.Lock()
	defer h.set.mu.Unlock()
	free := ^h.active & (1<<Windows - 1)
	if free == 0 {
		return nil, false
	}
	i := bits.TrailingZeros64(free)
	w := &Window{h: h, slot: i, key: k, start: start}
	h.windows[i] = w
	h.clearSlot(i)
	h.active |= 1 << i
	h.publishActive()
	return w, true
}

// startOf returns a window's starting value for k: the level's value, or
// zero without one.
func (h *HighWatermark) startOf(k Key) int64 {
	var l int64
	switch {
	case h.level == nil:
		return 0
	case h.level.ofOwner != nil:
		l = h.level.ofOwner(k.Owner)
	default:
		l = h.level.ReadAt(k)
	}
	return h.ToMark(max(l, 0))
}

// ToMark returns how the watermark marks the value v: v itself for a high
// watermark; for a low one, which keeps the largest of lowBase less each
// value, lowBase less v. A tool that keeps a mark of its own next to a
// Window's (a stopped handle's) combines the two with max and reads the
// result through FromMark.
func (h *HighWatermark) ToMark(v int64) int64 {
	if h.low {
		return lowBase - max(v, 0)
	}
	return v
}

// FromMark returns the value a mark stands for (ToMark's inverse); for a
// low watermark, math.MaxInt64 for the mark 0, which nothing observed.
func (h *HighWatermark) FromMark(m int64) int64 {
	if h.low {
		return lowBase - m
	}
	return m
}

// clearSlot zeroes slot i of every shard; h.set.mu is held. A writer that
// observes a value while this runs may leave it in the slot: it was
// observed as the window started.
func (h *HighWatermark) clearSlot(i int) {
	h.sharedWin[i].Store(0)
	h.set.each(func(s *WatermarkShard) { asm.StoreRelaxed64(&s.win[i], 0) })
}

// publishActive tells every writer which windows are open; h.set.mu is
// held.
func (h *HighWatermark) publishActive() {
	h.sharedAct.Store(h.active)
	h.set.each(func(s *WatermarkShard) { asm.StoreRelaxed64(&s.active, h.active) })
}

// Reset starts the window again from now: what was observed before is
// forgotten. It does nothing to a closed window.
func (w *Window) Reset() {
	start := w.h.startOf(w.key)
	h := w.h
	h.set.mu.Lock()
	defer h.set.mu.Unlock()
	if w.closed {
		return
	}
	w.start, w.retired = start, 0
	h.clearSlot(w.slot)
}

// Value returns the window's value: the largest value observed by its
// Key's shards since its start, and no less than its starting level (for a
// low watermark's window the smallest, and no more); 0 for a closed
// window.
func (w *Window) Value() int64 {
	if m, ok := w.mark(); ok {
		return w.h.FromMark(m)
	}
	return 0
}

// Mark returns the window's mark (HighWatermark.ToMark: the value itself
// for a high watermark), 0 for a closed window.
func (w *Window) Mark() int64 {
	m, _ := w.mark()
	return m
}

// Watermark returns the watermark the window is on: the HighWatermark, or
// a LowWatermark's marks.
func (w *Window) Watermark() *HighWatermark { return w.h }

// mark returns the window's mark, and false for a closed window.
func (w *Window) mark() (int64, bool) {
	h := w.h
	h.set.mu.Lock()
	defer h.set.mu.Unlock()
	if w.closed {
		return 0, false
	}
	v := max(w.start, w.retired)
	if w.key.Owner == nil {
		v = max(v, h.sharedWin[w.slot].Load())
	}
	h.set.each(func(s *WatermarkShard) {
		if w.key.Owner == nil || s.owner == w.key.Owner {
			v = max(v, int64(asm.LoadAcquire64(&s.win[w.slot])))
		}
	})
	return v, true
}

// Close closes the window and frees its slot; closing a closed window does
// nothing.
func (w *Window) Close() {
	h := w.h
	h.set.mu.Lock()
	defer h.set.mu.Unlock()
	if w.closed {
		return
	}
	w.closed = true
	h.windows[w.slot] = nil
	h.active &^= 1 << w.slot
	h.publishActive()
}

// lowBase is what a LowWatermark's inner high watermark marks less each
// value: the largest mark is the smallest value.
const lowBase = math.MaxInt64

// LowWatermark is the smallest value a level has reached: since the start
// of the process (Value, ValueOf), and since the start of each open Window
// (OpenWindow). It keeps a HighWatermark of math.MaxInt64 less each value,
// so its writers cost what a HighWatermark's do. A value below zero is
// taken as zero.
type LowWatermark struct {
	*Var
	h *HighWatermark // marks lowBase-v; not registered
}

// NewLowWatermark registers a low-watermark. Its value is math.MaxInt64
// until a value is observed (WithLevel: a window starts from the level).
func NewLowWatermark(name, doc string, opts ...Option) *LowWatermark {
	l := &LowWatermark{h: &HighWatermark{low: true}}
	l.Var = register(name, doc, ClassLowWatermark, l.Value, func(k Key) int64 { return l.ValueOf(k.Owner) }, opts)
	l.h.Var = &Var{name: name, class: ClassHighWatermark, level: l.Var.level}
	l.Var.windows = l.h
	l.Var.split = l.h.split
	return l
}

// Observe records v from any goroutine.
func (l *LowWatermark) Observe(v int64) { l.h.Observe(l.h.ToMark(v)) }

// Value returns the smallest value observed, math.MaxInt64 if none.
func (l *LowWatermark) Value() int64 { return l.h.FromMark(l.h.Value()) }

// ValueOf returns the smallest value o's shards observed, the closed ones
// included (math.MaxInt64 if none); for a nil o, Value.
func (l *LowWatermark) ValueOf(o *Owner) int64 { return l.h.FromMark(l.h.ValueOf(o)) }

// Shard returns a new part of the watermark for one writer at a time, with
// no owner.
func (l *LowWatermark) Shard() *LowWatermarkShard { return l.ShardOf(nil) }

// ShardOf returns a new part of the watermark for one writer at a time,
// counted in o's value too (nil: no owner).
func (l *LowWatermark) ShardOf(o *Owner) *LowWatermarkShard {
	s := &LowWatermarkShard{WatermarkShard{of: l.h, owner: o}}
	l.h.addShard(&s.WatermarkShard)
	return s
}

// OpenWindow opens a window on the low watermark for the shards k names,
// starting now (HighWatermark.OpenWindow); its Value is the smallest value
// observed since.
func (l *LowWatermark) OpenWindow(k Key) (*Window, bool) { return l.h.OpenWindow(k) }

// LowWatermarkShard is a part of a LowWatermark that one goroutine at a
// time updates without locked instructions. Its minimum stays after Close.
type LowWatermarkShard struct{ WatermarkShard }

// Observe records v.
func (s *LowWatermarkShard) Observe(v int64) { s.WatermarkShard.Observe(lowBase - max(v, 0)) }
