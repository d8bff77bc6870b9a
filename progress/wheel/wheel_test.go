package wheel

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"testing"
	"time"
)

// model is the reference the wheel is checked against: a map of due times.
// Its callbacks check that a timer fires only when due and only once, and,
// when rng is set, schedule and cancel timers at random from inside Advance.
type model struct {
	tb     testing.TB
	w      *Wheel
	timers []Timer
	index  map[*Timer]int
	due    map[int]uint64 // pending timers by index
	rng    *rand.Rand     // nil: callbacks only record

	now   uint64       // time of the running Advance
	fired int          // callbacks run by the running Advance
	again map[int]bool // scheduled during the running Advance
}

func newModel(tb testing.TB, shift uint, now uint64, n int, rng *rand.Rand) *model {
	m := &model{
		tb:     tb,
		w:      New(shift, now),
		timers: make([]Timer, n),
		index:  map[*Timer]int{},
		due:    map[int]uint64{},
		rng:    rng,
		again:  map[int]bool{},
	}
	for i := range m.timers {
		m.index[&m.timers[i]] = i
		m.timers[i].Init(m.callback)
	}
	return m
}

func (m *model) callback(t *Timer) {
	m.tb.Helper()
	i, ok := m.index[t]
	if !ok {
		m.tb.Fatal("unknown timer fired")
	}
	d, ok := m.due[i]
	switch {
	case !ok:
		m.tb.Fatalf("timer %d fired but was not pending", i)
	case m.again[i]:
		m.tb.Fatalf("timer %d fired in the Advance that scheduled it", i)
	case d > m.now:
		m.tb.Fatalf("timer %d due %d fired early at %d", i, d, m.now)
	case t.Pending():
		m.tb.Fatalf("timer %d pending in its own callback", i)
	case m.w.Now() != m.now:
		m.tb.Fatalf("Now = %d in a callback of Advance(%d)", m.w.Now(), m.now)
	}
	delete(m.due, i)
	m.fired++
	if m.rng == nil {
		return
	}
	for range m.rng.IntN(3) {
		j := m.rng.IntN(len(m.timers))
		if m.rng.IntN(3) == 0 {
			m.cancel(j)
		} else {
			m.schedule(j, m.randDue(m.rng))
		}
	}
}

func (m *model) schedule(i int, due uint64) {
	m.tb.Helper()
	if err := m.w.Schedule(&m.timers[i], due); err != nil {
		m.tb.Fatal(err)
	}
	m.due[i] = due
	m.again[i] = true // cleared as Advance starts
}

func (m *model) cancel(i int) {
	m.tb.Helper()
	_, pending := m.due[i]
	if got := m.w.Cancel(&m.timers[i]); got != pending {
		m.tb.Fatalf("Cancel(%d) = %v, want %v", i, got, pending)
	}
	delete(m.due, i)
}

// advance moves to now and checks that exactly the due timers fired.
func (m *model) advance(now uint64) {
	m.tb.Helper()
	prev := m.w.Now()
	m.now = max(now, prev)
	m.fired = 0
	clear(m.again)
	n := m.w.Advance(now)
	if n != m.fired {
		m.tb.Fatalf("Advance returned %d, %d callbacks ran", n, m.fired)
	}
	if m.w.Now() != m.now {
		m.tb.Fatalf("Now = %d after Advance(%d) from %d", m.w.Now(), now, prev)
	}
	for i, d := range m.due {
		if d <= m.now && !m.again[i] {
			m.tb.Fatalf("timer %d due %d not fired at %d (shift %d, from %d)", i, d, m.now, m.w.shift, prev)
		}
	}
	clear(m.again)
	m.check()
}

// check compares the wheel's state with the model's and checks the wheel's
// internal invariants.
func (m *model) check() {
	m.tb.Helper()
	if m.w.Len() != len(m.due) {
		m.tb.Fatalf("Len = %d, want %d", m.w.Len(), len(m.due))
	}
	next, ok := m.w.NextDue()
	if ok != (len(m.due) > 0) {
		m.tb.Fatalf("NextDue ok = %v with %d pending", ok, len(m.due))
	}
	lo := uint64(math.MaxUint64)
	for i := range m.timers {
		d, pending := m.due[i]
		t := &m.timers[i]
		if t.Pending() != pending || pending && t.Due() != d {
			m.tb.Fatalf("timer %d: Pending %v Due %d, want %v, %d", i, t.Pending(), t.Due(), pending, d)
		}
		if pending {
			lo = min(lo, d)
		}
	}
	if ok && next > lo {
		m.tb.Fatalf("NextDue = %d, later than the earliest due %d", next, lo)
	}
	if err := m.w.verify(); err != nil {
		m.tb.Fatal(err)
	}
}

// randDue returns a due time relative to the wheel's time, spread over every
// level, the past and the overflow list.
func (m *model) randDue(rng *rand.Rand) uint64 {
	now := m.w.Now()
	switch rng.IntN(10) {
	case 0:
		return now - min(now, rng.Uint64N(1<<rng.IntN(20)+1))
	case 1:
		return now
	case 2:
		return math.MaxUint64 - rng.Uint64N(1<<rng.IntN(64))
	case 3:
		return addSat(now, uint64(1)<<rng.IntN(64)+rng.Uint64N(3)-1)
	default:
		return addSat(now, rng.Uint64N(1<<rng.IntN(42)))
	}
}

func addSat(a, b uint64) uint64 {
	s, c := bits.Add64(a, b, 0)
	if c != 0 {
		return math.MaxUint64
	}
	return s
}

// verify checks the wheel's invariants: every pending timer on exactly the
// list its due time calls for, the occupancy bits and due bounds right.
func (w *Wheel) verify() error {
	if w.tick != w.now>>w.shift {
		return errors.New("tick out of step with now")
	}
	if w.head[firing] != nil {
		return errors.New("firing list not empty outside Advance")
	}
	n := 0
	for i := range lists {
		if i < expired && (w.head[i] != nil) != (w.occ[i/slots]&(1<<(i%slots)) != 0) {
			return fmt.Errorf("list %d: occupancy bit wrong", i)
		}
		var prev *Timer
		for t := w.head[i]; t != nil; prev, t = t, t.next {
			n++
			if t.w != w || int(t.list) != i || t.prev != prev {
				return fmt.Errorf("list %d: timer links wrong", i)
			}
			if t.due < w.low[i] {
				return fmt.Errorf("list %d: due %d below its bound %d", i, t.due, w.low[i])
			}
			tick := t.due >> w.shift
			switch {
			case i < expired:
				l, s := uint(i/slots), uint64(i%slots)
				sh := l * levelBits
				if t.due <= w.now || tick>>(sh+levelBits) != w.tick>>(sh+levelBits) ||
					tick>>sh&(slots-1) != s || w.tick>>sh&(slots-1) >= s {
					return fmt.Errorf("due %d in level %d slot %d at time %d shift %d", t.due, l, s, w.now, w.shift)
				}
			case i == expired:
				if t.due > w.now {
					return fmt.Errorf("due %d expired at time %d", t.due, w.now)
				}
			case i == current:
				if t.due <= w.now || tick != w.tick {
					return fmt.Errorf("due %d in the current tick at time %d", t.due, w.now)
				}
			case i == overflow:
				if tick <= w.tick || (tick^w.tick)>>spanBits == 0 {
					return fmt.Errorf("due %d on overflow at time %d", t.due, w.now)
				}
			}
		}
	}
	if n != w.n {
		return fmt.Errorf("%d timers linked, Len %d", n, w.n)
	}
	return nil
}

func TestFiresAtDueNotBefore(t *testing.T) {
	for _, shift := range []uint{0, 3, 10, 40, 63} {
		m := newModel(t, shift, 1000, 4, nil)
		m.schedule(0, 5000)
		m.schedule(1, 5001)
		m.schedule(2, 1<<20)
		m.schedule(3, 1<<50+7)
		m.advance(4999)
		if m.timers[0].Pending() != true {
			t.Fatal("fired early")
		}
		m.advance(5000)
		m.advance(5000)
		m.advance(5001)
		m.advance(1<<20 - 1)
		m.advance(1 << 20)
		m.advance(1<<50 + 6)
		m.advance(1<<50 + 7)
		if _, ok := m.w.NextDue(); ok {
			t.Fatal("NextDue reports a timer after all fired")
		}
	}
}

func TestDueWithinCurrentTickWaits(t *testing.T) {
	w := New(10, 1<<20) // tick of 1024 counts
	var a Timer
	fired := 0
	a.Init(func(*Timer) { fired++ })
	w.Schedule(&a, 1<<20+500)
	for now := uint64(1 << 20); now < 1<<20+500; now += 50 {
		if w.Advance(now) != 0 {
			t.Fatalf("fired at %d, due %d", now, a.Due())
		}
	}
	if w.Advance(1<<20+500) != 1 || fired != 1 {
		t.Fatal("did not fire at its due count")
	}
}

func TestNextDue(t *testing.T) {
	for _, shift := range []uint{0, 4, 10} {
		w := New(shift, 1<<30)
		now := w.Now()
		if _, ok := w.NextDue(); ok {
			t.Fatal("NextDue ok on an empty wheel")
		}
		ts := make([]Timer, 4)
		for i := range ts {
			ts[i].Init(func(*Timer) {})
		}
		// Level 0 (within 64 ticks): exact.
		w.Schedule(&ts[0], now+40<<shift+3)
		w.Schedule(&ts[1], now+17<<shift+1)
		if next, _ := w.NextDue(); next != now+17<<shift+1 {
			t.Fatalf("shift %d: NextDue = %d, want %d", shift, next, now+17<<shift+1)
		}
		w.Cancel(&ts[1])
		if next, _ := w.NextDue(); next != now+40<<shift+3 {
			t.Fatalf("shift %d: NextDue = %d, want %d", shift, next, now+40<<shift+3)
		}
		// Far timers: a lower bound; the past: at most the due time.
		w.Schedule(&ts[2], now+1<<(shift+30)+12345)
		w.Cancel(&ts[0])
		if next, _ := w.NextDue(); next > now+1<<(shift+30)+12345 {
			t.Fatalf("shift %d: NextDue = %d, later than due", shift, next)
		}
		w.Schedule(&ts[3], now-7)
		if next, _ := w.NextDue(); next != now-7 {
			t.Fatalf("shift %d: NextDue = %d with a timer due in the past", shift, next)
		}
		w.Advance(now)
		if next, ok := w.NextDue(); !ok || next > now+1<<(shift+30)+12345 {
			t.Fatalf("shift %d: NextDue = %d, %v", shift, next, ok)
		}
		if w.Len() != 1 {
			t.Fatalf("Len = %d, want 1", w.Len())
		}
	}
}

func TestResetAndCancel(t *testing.T) {
	m := newModel(t, 2, 0, 4, nil)
	m.schedule(0, 100)
	m.schedule(0, 10) // earlier
	m.schedule(1, 50)
	m.schedule(1, 5000) // later
	m.schedule(2, 70)
	m.cancel(2)
	m.cancel(2) // no longer pending
	m.cancel(3) // never scheduled
	m.advance(60)
	m.advance(4999)
	m.advance(5000)
	m.cancel(1) // already fired
	if m.w.Len() != 0 {
		t.Fatal("timers left")
	}
	var never Timer
	if m.w.Cancel(&never) || m.w.Cancel(nil) {
		t.Fatal("Cancel of a timer never scheduled reported it pending")
	}
}

func TestScheduleInPast(t *testing.T) {
	m := newModel(t, 4, 1000, 3, nil)
	m.schedule(0, 3)
	m.schedule(1, 1000)
	m.schedule(2, 0)
	if next, ok := m.w.NextDue(); !ok || next > 0 {
		t.Fatalf("NextDue = %d, %v", next, ok)
	}
	m.advance(0) // earlier than the wheel's time: taken as its time
	if m.w.Len() != 0 {
		t.Fatal("timers due in the past did not fire")
	}
}

func TestCallbacksRescheduleAndCancel(t *testing.T) {
	w := New(0, 0)
	var a, b, c Timer
	count := map[*Timer]int{}
	a.Init(func(t *Timer) {
		count[t]++
		if count[t] < 3 {
			w.Schedule(t, w.Now()+10) // periodic
		}
		w.Cancel(&b) // b is due too: cancelling it here must stop it
	})
	b.Init(func(t *Timer) {
		count[t]++
		w.Cancel(&a)
	})
	c.Init(func(t *Timer) {
		count[t]++
		w.Schedule(t, 0) // in the past: next Advance
	})
	w.Schedule(&a, 5)
	w.Schedule(&b, 5)
	w.Schedule(&c, 5)
	n := w.Advance(5)
	if count[&a]+count[&b] != 1 || count[&c] != 1 || n != 2 {
		t.Fatalf("first Advance fired %d: a %d b %d c %d", n, count[&a], count[&b], count[&c])
	}
	if w.Advance(5) != 1 || count[&c] != 2 {
		t.Fatalf("c rescheduled in the past did not fire at the next Advance")
	}
	w.Cancel(&c)
	for range 10 {
		w.Advance(w.Now() + 10)
	}
	if w.Len() != 0 || count[&a] > 3 {
		t.Fatalf("%d timers left, a fired %d times", w.Len(), count[&a])
	}
}

func TestNestedAdvance(t *testing.T) {
	// A callback that cancels the last timer collected and then advances
	// the wheel itself must not lose the timers that Advance collects.
	w := New(0, 0)
	ts := make([]Timer, 4)
	fired := map[*Timer]bool{}
	first := true
	for i := range ts {
		ts[i].Init(func(x *Timer) {
			fired[x] = true
			if first {
				first = false
				if w.tail == nil || w.tail == x {
					t.Fatal("expected further timers to fire")
				}
				w.Cancel(w.tail)
				w.Advance(8)
			}
		})
	}
	for i := range 3 {
		w.Schedule(&ts[i], 5)
	}
	w.Schedule(&ts[3], 8)
	w.Advance(5)
	if len(fired) != 3 || !fired[&ts[3]] || w.Len() != 0 {
		t.Fatalf("fired %d timers, %d left", len(fired), w.Len())
	}
	if err := w.verify(); err != nil {
		t.Fatal(err)
	}
}

func TestCallbackSchedulesManyDue(t *testing.T) {
	// A callback rescheduling every other due timer, including ones not
	// yet fired, must neither lose nor double-fire any of them.
	m := newModel(t, 3, 0, 200, rand.New(rand.NewPCG(5, 5)))
	for i := range m.timers {
		m.schedule(i, uint64(i%7))
	}
	for range 50 {
		m.advance(m.w.Now() + 3)
	}
}

func TestHugeJumpsAndEdges(t *testing.T) {
	const max = math.MaxUint64
	for _, shift := range []uint{0, 1, 11, 40, 63} {
		m := newModel(t, shift, 0, 7, nil)
		m.schedule(0, 1)
		m.schedule(1, 1<<50)
		m.schedule(2, 1<<62)
		m.schedule(3, max-1)
		m.schedule(4, max)
		m.schedule(5, 1<<49+12345)
		m.schedule(6, 1<<63+1<<48)
		m.advance(1 << 49)
		m.advance(1<<62 - 1)
		m.advance(1 << 62)
		m.advance(1<<63 + 1<<48 - 1)
		m.advance(1<<63 + 1<<48)
		m.advance(max - 2)
		m.advance(max - 1)
		m.advance(max)
		if m.w.Len() != 0 {
			t.Fatalf("shift %d: %d left", shift, m.w.Len())
		}
		m.schedule(0, max)
		m.advance(max)
	}
	// Starting near the end of the clock's range.
	for _, shift := range []uint{0, 5} {
		m := newModel(t, shift, max-1000, 3, nil)
		m.schedule(0, max-10)
		m.schedule(1, max)
		m.schedule(2, max-1001)
		m.advance(max - 11)
		m.advance(max - 10)
		m.advance(max - 1)
		m.advance(max)
	}
	// A jump of 2^60 counts over a wheel of timers far apart.
	m := newModel(t, 0, 0, 100, nil)
	for i := range m.timers {
		m.schedule(i, uint64(i+1)<<54)
	}
	m.advance(1 << 60)
	m.advance(max)
}

func TestMisuse(t *testing.T) {
	w, other := New(0, 0), New(0, 0)
	var bare Timer
	if err := w.Schedule(&bare, 1); !errors.Is(err, ErrNoCallback) {
		t.Errorf("Schedule of uninitialised timer = %v", err)
	}
	if err := w.Schedule(nil, 1); !errors.Is(err, ErrNoCallback) {
		t.Errorf("Schedule of nil timer = %v", err)
	}
	var x Timer
	x.Init(func(*Timer) {})
	w.Schedule(&x, 10)
	if err := other.Schedule(&x, 5); !errors.Is(err, ErrOtherWheel) {
		t.Errorf("Schedule on a second wheel = %v", err)
	}
	if other.Cancel(&x) {
		t.Error("Cancel on the wrong wheel succeeded")
	}
	if !x.Pending() || x.Due() != 10 || w.Len() != 1 || other.Len() != 0 {
		t.Error("failed Schedule changed the timer")
	}
	w.Advance(10)
	if err := other.Schedule(&x, 5); err != nil {
		t.Errorf("Schedule on a second wheel after firing = %v", err)
	}
	if New(99, 0).Shift() != 63 {
		t.Error("shift not clamped")
	}
	var zero Wheel // usable: tick of one count, time zero
	zero.Schedule(&bare, 1)
	bare.Init(func(*Timer) {})
	zero.Schedule(&bare, 1)
	if zero.Advance(0) != 0 || zero.Advance(1) != 1 {
		t.Error("zero Wheel misbehaves")
	}
}

func TestRandomAgainstModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 9))
	ops := 100_000
	if testing.Short() {
		ops = 20_000
	}
	const rounds = 20
	shifts := []uint{0, 1, 3, 6, 10, 11, 17, 20, 30, 47, 63}
	starts := []uint64{0, 1 << 40, math.MaxUint64 - 1<<42, math.MaxUint64 - 1<<30}
	for r := range rounds {
		shift := shifts[r%len(shifts)]
		start := starts[r%len(starts)]
		if r%5 == 4 {
			start = rng.Uint64()
		}
		var cb *rand.Rand
		if r%2 == 1 {
			cb = rand.New(rand.NewPCG(uint64(r), 1))
		}
		m := newModel(t, shift, start, 64, cb)
		for range ops / rounds {
			i := rng.IntN(len(m.timers))
			switch op := rng.IntN(100); {
			case op < 45:
				m.schedule(i, m.randDue(rng))
			case op < 60:
				m.cancel(i)
			case op < 65:
				m.advance(m.w.Now())
			case op < 67:
				m.advance(m.w.Now() - 1) // backwards: ignored
			default:
				m.advance(addSat(m.w.Now(), rng.Uint64N(1<<rng.IntN(41)+1)))
			}
			m.check()
		}
		m.rng = nil
		m.advance(math.MaxUint64)
		m.advance(math.MaxUint64)
		if m.w.Len() != 0 {
			t.Fatalf("%d left at the end of time", m.w.Len())
		}
	}
}

func FuzzWheel(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16})
	f.Add([]byte{3, 0, 0, 0, 0, 0, 0, 0, 0xff, 0x80, 1, 0, 0, 0, 0, 0, 0, 0xff, 1, 2})
	f.Add([]byte{10, 0, 0, 0, 0, 0, 0, 0, 0,
		0, 0, 1, 0, 0, 0, 0, 0, 0, 0,
		4, 1, 2, 0, 0, 0, 0, 0, 0, 0,
		3, 0, 0x30, 0, 0, 0, 0, 0, 0, 0,
		7, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{0x80, 0xf0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
		0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
		1, 3, 0x40, 0, 0, 0, 0, 0, 0, 0,
		3, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 9 {
			return
		}
		shift := uint(data[0] & 63)
		var cb *rand.Rand
		if data[0]&0x80 != 0 {
			cb = rand.New(rand.NewPCG(uint64(len(data)), uint64(data[0])))
		}
		m := newModel(t, shift, binary.LittleEndian.Uint64(data[1:9]), 8, cb)
		data = data[9:]
		for ; len(data) >= 10; data = data[10:] {
			op, i := data[0]%8, int(data[1])%len(m.timers)
			v := binary.LittleEndian.Uint64(data[2:10])
			now := m.w.Now()
			switch op {
			case 0: // absolute due
				m.schedule(i, v)
			case 1, 2: // due ahead, at every scale
				m.schedule(i, addSat(now, v>>(v&63)))
			case 3: // due behind
				m.schedule(i, now-min(now, v>>(v&63)))
			case 4:
				m.cancel(i)
			case 5: // absolute time
				m.advance(v)
			default: // ahead, at every scale
				m.advance(addSat(now, v>>(v&63)))
			}
			m.check()
		}
		m.rng = nil
		m.advance(math.MaxUint64)
		m.advance(math.MaxUint64)
		if m.w.Len() != 0 {
			t.Fatalf("%d left at the end of time", m.w.Len())
		}
	})
}

func TestAllocs(t *testing.T) {
	w := New(4, 0)
	ts := make([]Timer, 100)
	for i := range ts {
		ts[i].Init(func(*Timer) {})
	}
	if n := testing.AllocsPerRun(1000, func() {
		w.Schedule(&ts[0], w.Now()+12345)
		w.Schedule(&ts[0], w.Now()+1<<40)
		w.Cancel(&ts[0])
	}); n != 0 {
		t.Errorf("Schedule/Cancel allocate %v times", n)
	}
	now := uint64(0)
	if n := testing.AllocsPerRun(1000, func() {
		for i := range ts {
			w.Schedule(&ts[i], now+uint64(i)*1000+1)
		}
		now += 200_000
		w.Advance(now)
	}); n != 0 {
		t.Errorf("Advance allocates %v times", n)
	}
}

// populate arms n timers with random due times up to 2^40 counts (minutes of
// a GHz counter) ahead, as a loaded engine would hold.
func populate(w *Wheel, n int, rng *rand.Rand) []Timer {
	ts := make([]Timer, n)
	for i := range ts {
		ts[i].Init(func(*Timer) {})
		w.Schedule(&ts[i], w.Now()+1+rng.Uint64N(1<<40))
	}
	return ts
}

// randDues returns due times like those of populate, to index in a loop.
func randDues(w *Wheel, rng *rand.Rand) []uint64 {
	dues := make([]uint64, 4096)
	for i := range dues {
		dues[i] = w.Now() + 1 + rng.Uint64N(1<<40)
	}
	return dues
}

// BenchmarkScheduleCancel arms and cancels a timer with 1,000,000 others
// pending.
func BenchmarkScheduleCancel(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 1))
	w := New(10, 1<<40)
	populate(w, 1_000_000, rng)
	dues := randDues(w, rng)
	var t Timer
	t.Init(func(*Timer) {})
	i := 0
	for b.Loop() {
		w.Schedule(&t, dues[i&4095])
		w.Cancel(&t)
		i++
	}
}

// BenchmarkAfterFuncStop is the standard library's equivalent of
// BenchmarkScheduleCancel, for comparison in the same run.
func BenchmarkAfterFuncStop(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 1))
	pending := make([]*time.Timer, 1_000_000)
	f := func() {}
	for i := range pending {
		pending[i] = time.AfterFunc(time.Hour+time.Duration(rng.Int64N(int64(time.Minute))), f)
	}
	defer func() {
		for _, t := range pending {
			t.Stop()
		}
	}()
	durs := make([]time.Duration, 4096)
	for i := range durs {
		durs[i] = time.Hour + time.Duration(rng.Int64N(int64(time.Minute)))
	}
	i := 0
	for b.Loop() {
		time.AfterFunc(durs[i&4095], f).Stop()
		i++
	}
}

// BenchmarkReset moves pending timers among 1,000,000.
func BenchmarkReset(b *testing.B) {
	rng := rand.New(rand.NewPCG(2, 2))
	w := New(10, 1<<40)
	ts := populate(w, 1_000_000, rng)
	dues := randDues(w, rng)
	i := 0
	for b.Loop() {
		w.Schedule(&ts[i&1023], dues[i&4095])
		i++
	}
}

// BenchmarkAdvance fires b.N timers spread over 2^36 counts, advancing 2^26
// counts at a time; an op is one timer fired, its cascades included.
func BenchmarkAdvance(b *testing.B) {
	rng := rand.New(rand.NewPCG(3, 3))
	w := New(10, 0)
	ts := make([]Timer, b.N)
	for i := range ts {
		ts[i].Init(func(*Timer) {})
		w.Schedule(&ts[i], 1+rng.Uint64N(1<<36))
	}
	b.ResetTimer()
	fired := 0
	for w.Len() > 0 {
		fired += w.Advance(w.Now() + 1<<26)
	}
	b.StopTimer()
	if fired != b.N {
		b.Fatalf("fired %d of %d", fired, b.N)
	}
}

// TestTakeLate: the lateness of fired timers, summed, the most and the
// least, taken and started again; none fired reads zeros.
func TestTakeLate(t *testing.T) {
	w := New(0, 0)
	if s, m, l := w.TakeLate(); s != 0 || m != 0 || l != 0 {
		t.Errorf("none fired: %d %d %d", s, m, l)
	}
	ts := make([]Timer, 3)
	for i, due := range []uint64{10, 20, 30} {
		ts[i].Init(func(*Timer) {})
		if err := w.Schedule(&ts[i], due); err != nil {
			t.Fatal(err)
		}
	}
	if n := w.Advance(50); n != 3 {
		t.Fatalf("fired %d, want 3", n)
	}
	if s, m, l := w.TakeLate(); s != 90 || m != 40 || l != 20 {
		t.Errorf("sum, most, least %d %d %d; want 90 40 20", s, m, l)
	}
	if err := w.Schedule(&ts[0], 50); err != nil {
		t.Fatal(err)
	}
	w.Advance(50)
	if s, m, l := w.TakeLate(); s != 0 || m != 0 || l != 0 {
		t.Errorf("one on time: %d %d %d; want zeros", s, m, l)
	}
}
