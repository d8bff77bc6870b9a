package wheel

import (
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// model is the reference the wheel is checked against: a map of due times.
type model struct {
	t      *testing.T
	w      *Wheel
	timers []Timer
	due    map[int]uint64 // pending timers by index
	fired  map[int]bool   // fired in the current Advance
}

func newModel(t *testing.T, shift uint, now uint64, n int) *model {
	m := &model{t: t, w: New(shift, now), timers: make([]Timer, n), due: map[int]uint64{}}
	for i := range m.timers {
		m.timers[i].Init(func(x *Timer) {
			j := m.index(x)
			if m.fired[j] {
				t.Fatalf("timer %d fired twice in one Advance", j)
			}
			m.fired[j] = true
		})
	}
	return m
}

func (m *model) index(x *Timer) int {
	for i := range m.timers {
		if &m.timers[i] == x {
			return i
		}
	}
	m.t.Fatal("unknown timer fired")
	return -1
}

func (m *model) schedule(i int, due uint64) {
	m.t.Helper()
	if err := m.w.Schedule(&m.timers[i], due); err != nil {
		m.t.Fatal(err)
	}
	m.due[i] = due
}

func (m *model) cancel(i int) {
	m.t.Helper()
	_, pending := m.due[i]
	if got := m.w.Cancel(&m.timers[i]); got != pending {
		m.t.Fatalf("Cancel(%d) = %v, want %v", i, got, pending)
	}
	delete(m.due, i)
}

// advance moves to now and checks that exactly the due timers fired.
func (m *model) advance(now uint64) {
	m.t.Helper()
	prev := m.w.Now()
	if now < prev {
		now = prev
	}
	m.fired = map[int]bool{}
	n := m.w.Advance(now)
	if n != len(m.fired) {
		m.t.Fatalf("Advance returned %d, %d callbacks ran", n, len(m.fired))
	}
	for i := range m.fired {
		if d, ok := m.due[i]; !ok {
			m.t.Fatalf("timer %d fired but was not pending", i)
		} else if d > now {
			m.t.Fatalf("timer %d due %d fired early at %d", i, d, now)
		}
		delete(m.due, i)
	}
	for i, d := range m.due {
		if d <= now {
			m.t.Fatalf("timer %d due %d not fired at %d (shift %d, from %d)", i, d, now, m.w.shift, prev)
		}
	}
	m.check()
}

func (m *model) check() {
	m.t.Helper()
	if m.w.Len() != len(m.due) {
		m.t.Fatalf("Len = %d, want %d", m.w.Len(), len(m.due))
	}
	next, ok := m.w.NextDue()
	if ok != (len(m.due) > 0) {
		m.t.Fatalf("NextDue ok = %v with %d pending", ok, len(m.due))
	}
	lo := uint64(math.MaxUint64)
	for i, d := range m.due {
		lo = min(lo, d)
		if !m.timers[i].Pending() || m.timers[i].Due() != d {
			m.t.Fatalf("timer %d: Pending %v Due %d, want due %d", i, m.timers[i].Pending(), m.timers[i].Due(), d)
		}
	}
	if ok && next > lo {
		m.t.Fatalf("NextDue = %d, later than the earliest due %d", next, lo)
	}
}

func TestFiresAtDueNotBefore(t *testing.T) {
	for _, shift := range []uint{0, 3, 10} {
		m := newModel(t, shift, 1000, 3)
		m.schedule(0, 5000)
		m.schedule(1, 5001)
		m.schedule(2, 1<<20)
		if next, _ := m.w.NextDue(); next > 5000 {
			t.Fatalf("NextDue = %d", next)
		}
		m.advance(4999)
		m.advance(5000)
		m.advance(5000)
		m.advance(5001)
		m.advance(1<<20 - 1)
		m.advance(1 << 20)
		if _, ok := m.w.NextDue(); ok {
			t.Fatal("NextDue reports a timer after all fired")
		}
	}
}

func TestNextDueExactForNearTimers(t *testing.T) {
	w := New(0, 0)
	var a, b Timer
	a.Init(func(*Timer) {})
	b.Init(func(*Timer) {})
	w.Schedule(&a, 40)
	w.Schedule(&b, 17)
	if next, _ := w.NextDue(); next != 17 {
		t.Fatalf("NextDue = %d, want 17", next)
	}
	w.Cancel(&b)
	if next, _ := w.NextDue(); next != 40 {
		t.Fatalf("NextDue = %d, want 40", next)
	}
}

func TestResetAndCancel(t *testing.T) {
	m := newModel(t, 2, 0, 4)
	m.schedule(0, 100)
	m.schedule(0, 10) // earlier
	m.schedule(1, 50)
	m.schedule(1, 5000) // later
	m.schedule(2, 70)
	m.cancel(2)
	m.cancel(2)
	m.cancel(3) // never scheduled
	m.advance(60)
	m.advance(4999)
	m.advance(5000)
	if m.w.Len() != 0 {
		t.Fatal("timers left")
	}
}

func TestScheduleInPast(t *testing.T) {
	m := newModel(t, 4, 1000, 2)
	m.schedule(0, 3)
	m.schedule(1, 1000)
	if next, ok := m.w.NextDue(); !ok || next > 3 {
		t.Fatalf("NextDue = %d, %v", next, ok)
	}
	m.advance(0) // earlier than the wheel's time: taken as its time
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
	for i := uint64(0); i < 10 && w.Len() > 1; i++ {
		w.Advance(w.Now() + 10)
	}
	w.Cancel(&c)
	if w.Len() != 0 {
		t.Fatalf("%d timers left", w.Len())
	}
}

func TestHugeJumpsAndEdges(t *testing.T) {
	const max = math.MaxUint64
	for _, shift := range []uint{0, 1, 11, 40} {
		m := newModel(t, shift, 0, 6)
		m.schedule(0, 1)
		m.schedule(1, 1<<50)
		m.schedule(2, 1<<62)
		m.schedule(3, max-1)
		m.schedule(4, max)
		m.schedule(5, 1<<49+12345)
		m.advance(1 << 49)
		m.advance(1<<62 - 1)
		m.advance(1 << 62)
		m.advance(max - 2)
		m.advance(max - 1)
		m.advance(max)
		if m.w.Len() != 0 {
			t.Fatalf("shift %d: %d left", shift, m.w.Len())
		}
	}
	// Starting near the end of the clock's range.
	m := newModel(t, 0, math.MaxUint64-1000, 2)
	m.schedule(0, math.MaxUint64-10)
	m.schedule(1, math.MaxUint64)
	m.advance(math.MaxUint64 - 11)
	m.advance(math.MaxUint64)
}

func TestMisuse(t *testing.T) {
	w, other := New(0, 0), New(0, 0)
	var bare Timer
	if err := w.Schedule(&bare, 1); !errors.Is(err, ErrNoCallback) {
		t.Errorf("Schedule of uninitialised timer = %v", err)
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
	w.Advance(10)
	if err := other.Schedule(&x, 5); err != nil {
		t.Errorf("Schedule on a second wheel after firing = %v", err)
	}
	if New(99, 0).Shift() != 63 {
		t.Error("shift not clamped")
	}
}

func TestRandomAgainstModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 9))
	ops := 100_000
	if testing.Short() {
		ops = 20_000
	}
	for _, shift := range []uint{0, 5, 11} {
		m := newModel(t, shift, rng.Uint64N(1<<40), 64)
		for range ops / 3 {
			i := rng.IntN(len(m.timers))
			switch op := rng.IntN(10); {
			case op < 5:
				span := uint64(1) << rng.IntN(50)
				m.schedule(i, m.w.Now()+rng.Uint64N(span)-min(span/8, m.w.Now()))
			case op < 7:
				m.cancel(i)
			default:
				span := uint64(1) << rng.IntN(42)
				m.advance(m.w.Now() + rng.Uint64N(span))
			}
		}
	}
}

func FuzzWheel(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16})
	f.Add([]byte{3, 0, 0, 0, 0, 0, 0, 0, 0xff, 0x80, 1, 0, 0, 0, 0, 0, 0, 0xff, 1, 2})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 9 {
			return
		}
		shift := uint(data[0] % 20)
		now := binary.LittleEndian.Uint64(data[1:9])
		m := newModel(t, shift, now, 8)
		data = data[9:]
		for len(data) >= 9 {
			op, i := data[0]%3, int(data[0]/3)%len(m.timers)
			v := binary.LittleEndian.Uint64(data[1:9])
			data = data[9:]
			switch op {
			case 0:
				m.schedule(i, v)
			case 1:
				m.cancel(i)
			default:
				m.advance(m.w.Now() + v>>(v&63))
			}
		}
	})
}

func TestAllocs(t *testing.T) {
	w := New(4, 0)
	ts := make([]Timer, 100)
	for i := range ts {
		ts[i].Init(func(*Timer) {})
	}
	now := uint64(0)
	if n := testing.AllocsPerRun(1000, func() {
		for i := range ts {
			w.Schedule(&ts[i], now+uint64(i)*1000+1)
		}
		w.Cancel(&ts[0])
		now += 200_000
		w.Advance(now)
	}); n != 0 {
		t.Fatalf("Schedule/Cancel/Advance allocate %v times", n)
	}
}

// populate arms n timers with random due times up to about a second of
// 2 GHz counts ahead, as a loaded engine would hold.
func populate(w *Wheel, n int, rng *rand.Rand) []Timer {
	ts := make([]Timer, n)
	for i := range ts {
		ts[i].Init(func(*Timer) {})
		w.Schedule(&ts[i], w.Now()+1+rng.Uint64N(1<<31))
	}
	return ts
}

// BenchmarkScheduleCancel arms and cancels a timer with 1,000,000 others
// pending.
func BenchmarkScheduleCancel(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 1))
	w := New(11, 1<<40)
	populate(w, 1_000_000, rng)
	var t Timer
	t.Init(func(*Timer) {})
	dues := make([]uint64, 4096)
	for i := range dues {
		dues[i] = w.Now() + 1 + rng.Uint64N(1<<31)
	}
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
		pending[i] = time.AfterFunc(time.Hour+time.Duration(rng.Int64N(int64(time.Second))), f)
	}
	defer func() {
		for _, t := range pending {
			t.Stop()
		}
	}()
	durs := make([]time.Duration, 4096)
	for i := range durs {
		durs[i] = time.Hour + time.Duration(rng.Int64N(int64(time.Second)))
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		time.AfterFunc(durs[i&4095], f).Stop()
	}
}

// BenchmarkReset moves a pending timer among 1,000,000.
func BenchmarkReset(b *testing.B) {
	rng := rand.New(rand.NewPCG(2, 2))
	w := New(11, 1<<40)
	ts := populate(w, 1_000_000, rng)
	dues := make([]uint64, 4096)
	for i := range dues {
		dues[i] = w.Now() + 1 + rng.Uint64N(1<<31)
	}
	i := 0
	for b.Loop() {
		w.Schedule(&ts[i%len(ts)], dues[i&4095])
		i++
	}
}

// BenchmarkAdvance fires timers spread over time, reporting the cost per
// timer fired, cascades included.
func BenchmarkAdvance(b *testing.B) {
	const n = 1 << 16
	ts := make([]Timer, n)
	for i := range ts {
		ts[i].Init(func(*Timer) {})
	}
	rng := rand.New(rand.NewPCG(3, 3))
	w := New(11, 0)
	for b.Loop() {
		b.StopTimer()
		for i := range ts {
			w.Schedule(&ts[i], w.Now()+1+rng.Uint64N(1<<30))
		}
		b.StartTimer()
		for w.Len() > 0 {
			w.Advance(w.Now() + 1<<14)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/fired")
}
