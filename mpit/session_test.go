package mpit

import (
	"errors"
	"math"
	"sync"
	"testing"

	"github.com/tachyon-hpc/tachyon/internal/testname"
	"github.com/tachyon-hpc/tachyon/pvar"
)

// Performance variables of the tests, one of each kind of behaviour.
var (
	testCounter = pvar.NewCounter("mpit_test_counter", "counts", pvar.WithUnit("events"))
	testLevel   = pvar.NewLevel("mpit_test_level", "a level")
	testHWM     = pvar.NewHighWatermark("mpit_test_hwm", "a high-watermark")
)

// session returns a new session, freed when the test ends.
func session(t *testing.T) *Session {
	t.Helper()
	s, err := NewSession()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Free() })
	return s
}

// pvarHandle allocates a handle in s on the variable named name of class c.
func pvarHandle(t *testing.T, s *Session, name string, c Class) *PvarHandle {
	t.Helper()
	i, err := PvarIndex(name, c)
	if err != nil {
		t.Fatalf("PvarIndex(%s, %v): %v", name, c, err)
	}
	h, n, err := s.HandleAlloc(i, nil)
	if err != nil || n != 1 {
		t.Fatalf("HandleAlloc(%s) = %d, %v; want count 1", name, n, err)
	}
	return h
}

// read reads h in s, failing the test on an error.
func read(t *testing.T, s *Session, h *PvarHandle) int64 {
	t.Helper()
	v, err := s.Read(h)
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	return v
}

func TestPvarEnumerate(t *testing.T) {
	initT(t)
	n, err := PvarNum()
	if err != nil || n < 3 {
		t.Fatalf("PvarNum = %d, %v", n, err)
	}
	for i := range n {
		d, err := PvarInfo(i)
		if err != nil || d.Name == "" {
			t.Fatalf("PvarInfo(%d) = %+v, %v", i, d, err)
		}
		if j, err := PvarIndex(d.Name, d.Class); err != nil || j != i {
			t.Errorf("PvarIndex(%s, %v) = %d, %v; want %d", d.Name, d.Class, j, err, i)
		}
	}
	for _, i := range []int{-1, n} {
		if _, err := PvarInfo(i); !errors.Is(err, ErrInvalidIndex) {
			t.Errorf("PvarInfo(%d) = %v, want ErrInvalidIndex", i, err)
		}
	}
	// A name is looked up with its class: the same name in another class
	// is another variable, here one that does not exist.
	if _, err := PvarIndex(testCounter.Name(), pvar.ClassLevel); !errors.Is(err, ErrInvalidName) {
		t.Errorf("PvarIndex of a counter's name as a level = %v, want ErrInvalidName", err)
	}
	if _, err := PvarIndex("mpit_no_such_variable", pvar.ClassCounter); !errors.Is(err, ErrInvalidName) {
		t.Errorf("PvarIndex of an unknown name = %v, want ErrInvalidName", err)
	}
	i, _ := PvarIndex(testCounter.Name(), pvar.ClassCounter)
	d, _ := PvarInfo(i)
	want := PvarDesc{Name: "mpit_test_counter", Desc: "counts (events)", Verbosity: VerbosityTunerBasic,
		Class: pvar.ClassCounter, Datatype: TypeUnsignedLongLong, Bind: BindNoObject, Atomic: true}
	if d != want {
		t.Errorf("PvarInfo(mpit_test_counter) = %+v, want %+v", d, want)
	}
}

func TestPvarClasses(t *testing.T) {
	initT(t)
	for c := pvar.ClassState; c <= pvar.ClassGeneric; c++ {
		name := testname.Uniq("mpit_test_class_" + c.String())
		pvar.NewFunc(name, "a "+c.String(), c, func() int64 { return 1 })
		i, err := PvarIndex(name, c)
		if err != nil {
			t.Fatalf("%v: %v", c, err)
		}
		d, _ := PvarInfo(i)
		s := c == pvar.ClassCounter || c == pvar.ClassAggregate || c == pvar.ClassTimer
		if d.ReadOnly == s || d.Continuous == s || d.Atomic != s {
			t.Errorf("%v: readonly %v, continuous %v, atomic %v", c, d.ReadOnly, d.Continuous, d.Atomic)
		}
		want := TypeUnsignedLongLong
		switch c {
		case pvar.ClassState:
			want = TypeInt
		case pvar.ClassPercentage:
			want = TypeDouble
		case pvar.ClassGeneric:
			want = TypeCount
		}
		if d.Datatype != want {
			t.Errorf("%v: datatype %v, want %v", c, d.Datatype, want)
		}
	}
}

func TestStoppedAfterAlloc(t *testing.T) {
	initT(t)
	s := session(t)
	h := pvarHandle(t, s, testCounter.Name(), pvar.ClassCounter)
	testCounter.Add(5)
	if v := read(t, s, h); v != 0 {
		t.Fatalf("a counter read %d before its start, want 0", v)
	}
	if err := s.Start(h); err != nil {
		t.Fatal(err)
	}
	testCounter.Add(3)
	if v := read(t, s, h); v != 3 {
		t.Fatalf("read %d after 3 events, want 3", v)
	}
	if err := s.Stop(h); err != nil {
		t.Fatal(err)
	}
	testCounter.Add(4)
	if v := read(t, s, h); v != 3 {
		t.Fatalf("read %d after events while stopped, want 3", v)
	}
	s.Start(h)
	s.Start(h) // started already: nothing changes
	testCounter.Add(1)
	if v := read(t, s, h); v != 4 {
		t.Fatalf("read %d after restarting, want 4", v)
	}
	if err := s.Write(h, 100); err != nil {
		t.Fatal(err)
	}
	testCounter.Add(2)
	if v := read(t, s, h); v != 102 {
		t.Fatalf("read %d after Write(100) and 2 events, want 102", v)
	}
}

func TestSessionIsolation(t *testing.T) {
	initT(t)
	s1, s2 := session(t), session(t)
	h1 := pvarHandle(t, s1, testCounter.Name(), pvar.ClassCounter)
	h2 := pvarHandle(t, s2, testCounter.Name(), pvar.ClassCounter)
	s1.Start(h1)
	testCounter.Add(10)
	s2.Start(h2)
	testCounter.Add(5)
	if a, b := read(t, s1, h1), read(t, s2, h2); a != 15 || b != 5 {
		t.Fatalf("readings %d, %d; want 15, 5", a, b)
	}
	s1.Reset(h1)
	s2.Stop(h2)
	testCounter.Add(7)
	if a, b := read(t, s1, h1), read(t, s2, h2); a != 7 || b != 5 {
		t.Fatalf("after s1's reset and s2's stop: %d, %d; want 7, 5", a, b)
	}
	s2.Write(h2, 1)
	s2.Reset(AllHandles)
	if a := read(t, s1, h1); a != 7 {
		t.Fatalf("s2's write and reset moved s1's reading to %d", a)
	}
	if _, err := s2.Read(h1); !errors.Is(err, ErrInvalidHandle) {
		t.Errorf("Read of s1's handle in s2 = %v, want ErrInvalidHandle", err)
	}
	if err := s2.Start(h1); !errors.Is(err, ErrInvalidHandle) {
		t.Errorf("Start of s1's handle in s2 = %v, want ErrInvalidHandle", err)
	}
	if err := s2.Free(); err != nil {
		t.Fatal(err)
	}
	if _, err := s2.Read(h2); !errors.Is(err, ErrInvalidSession) {
		t.Errorf("Read in a freed session = %v, want ErrInvalidSession", err)
	}
	testCounter.Add(1)
	if a := read(t, s1, h1); a != 8 {
		t.Fatalf("after s2's free, s1 reads %d, want 8", a)
	}
	if err := s1.FreeHandle(h1); err != nil {
		t.Fatal(err)
	}
	if _, err := s1.Read(h1); !errors.Is(err, ErrInvalidHandle) {
		t.Errorf("Read of a freed handle = %v, want ErrInvalidHandle", err)
	}
	var null *Session
	if _, err := null.Read(h1); !errors.Is(err, ErrInvalidSession) {
		t.Errorf("Read in a nil session = %v, want ErrInvalidSession", err)
	}
}

func TestContinuousStartStop(t *testing.T) {
	initT(t)
	s := session(t)
	l := pvarHandle(t, s, testLevel.Name(), pvar.ClassLevel)
	c := pvarHandle(t, s, testCounter.Name(), pvar.ClassCounter)
	testLevel.Add(6)
	defer testLevel.Add(-6)
	if v := read(t, s, l); v != 6 {
		t.Fatalf("a level reads %d before any start, want its current 6", v)
	}
	if err := s.Start(l); !errors.Is(err, ErrPvarNoStartStop) {
		t.Errorf("Start of a continuous variable = %v, want ErrPvarNoStartStop", err)
	}
	if err := s.Stop(l); !errors.Is(err, ErrPvarNoStartStop) {
		t.Errorf("Stop of a continuous variable = %v, want ErrPvarNoStartStop", err)
	}
	if err := s.Start(AllHandles); err != nil {
		t.Fatalf("Start(AllHandles) with a continuous handle = %v, want nil", err)
	}
	if err := s.Start(AllHandles); err != nil {
		t.Fatalf("Start(AllHandles) with every handle started = %v, want nil", err)
	}
	testCounter.Add(2)
	if v := read(t, s, c); v != 2 {
		t.Fatalf("counter started by AllHandles reads %d, want 2", v)
	}
	if err := s.Stop(AllHandles); err != nil {
		t.Fatalf("Stop(AllHandles) = %v", err)
	}
	testCounter.Add(2)
	if v := read(t, s, c); v != 2 {
		t.Fatalf("counter stopped by AllHandles reads %d, want 2", v)
	}
	if err := s.Start(AllHandles); err != nil || s.Stop(AllHandles) != nil {
		t.Fatal("Start/Stop(AllHandles) failed")
	}
	empty := session(t)
	if err := empty.Start(AllHandles); err != nil {
		t.Errorf("Start(AllHandles) of an empty session = %v, want nil", err)
	}
}

func TestReadonly(t *testing.T) {
	initT(t)
	s := session(t)
	l := pvarHandle(t, s, testLevel.Name(), pvar.ClassLevel)
	c := pvarHandle(t, s, testCounter.Name(), pvar.ClassCounter)
	if err := s.Write(l, 1); !errors.Is(err, ErrPvarNoWrite) {
		t.Errorf("Write of a read-only variable = %v, want ErrPvarNoWrite", err)
	}
	if err := s.Reset(l); !errors.Is(err, ErrPvarNoWrite) {
		t.Errorf("Reset of a read-only variable = %v, want ErrPvarNoWrite", err)
	}
	if _, err := s.ReadReset(l); !errors.Is(err, ErrPvarNoAtomic) {
		t.Errorf("ReadReset of a non-atomic variable = %v, want ErrPvarNoAtomic", err)
	}
	s.Start(c)
	testCounter.Add(3)
	if err := s.Reset(AllHandles); err != nil {
		t.Fatalf("Reset(AllHandles) with a read-only handle = %v, want nil", err)
	}
	if v := read(t, s, c); v != 0 {
		t.Errorf("counter after Reset(AllHandles) reads %d, want 0", v)
	}
	for name, f := range map[string]func() error{
		"Read":       func() error { _, err := s.Read(AllHandles); return err },
		"Write":      func() error { return s.Write(AllHandles, 0) },
		"ReadReset":  func() error { _, err := s.ReadReset(AllHandles); return err },
		"FreeHandle": func() error { return s.FreeHandle(AllHandles) },
	} {
		if err := f(); !errors.Is(err, ErrInvalidHandle) {
			t.Errorf("%s(AllHandles) = %v, want ErrInvalidHandle", name, err)
		}
	}
}

func TestReadResetConcurrent(t *testing.T) {
	initT(t)
	s := session(t)
	h := pvarHandle(t, s, testCounter.Name(), pvar.ClassCounter)
	s.Start(h)
	const writers, each, readers = 4, 20000, 8
	var wg, rw sync.WaitGroup
	done := make(chan struct{})
	sums := make([]int64, readers)
	for r := range readers {
		rw.Add(1)
		go func() {
			defer rw.Done()
			for {
				v, err := s.ReadReset(h)
				if err != nil {
					t.Error(err)
					return
				}
				if v < 0 {
					t.Errorf("ReadReset = %d", v)
				}
				sums[r] += v
				select {
				case <-done:
					return
				default:
				}
			}
		}()
	}
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sh := testCounter.Shard()
			defer sh.Close()
			for range each {
				sh.Inc()
			}
		}()
	}
	wg.Wait()
	close(done)
	rw.Wait()
	var total int64
	for _, v := range sums {
		total += v
	}
	total += read(t, s, h)
	if total != writers*each {
		t.Fatalf("readings sum to %d, want every one of the %d events once", total, writers*each)
	}
}

func TestWatermark(t *testing.T) {
	initT(t)
	s := session(t)
	h := pvarHandle(t, s, testHWM.Name(), pvar.ClassHighWatermark)
	d, _ := PvarInfo(mustIndex(t, testHWM.Name(), pvar.ClassHighWatermark))
	if d.Continuous || d.ReadOnly || d.Atomic {
		t.Errorf("a watermark: continuous %v, readonly %v, atomic %v; want a per-session variable that is not atomic", d.Continuous, d.ReadOnly, d.Atomic)
	}
	w := testHWM.Shard()
	defer w.Close()
	w.Observe(50) // before the handle starts: not its mark
	if v := read(t, s, h); v != 0 {
		t.Fatalf("a stopped watermark reads %d, want 0", v)
	}
	if err := s.Start(h); err != nil {
		t.Fatal(err)
	}
	w.Observe(5)
	testHWM.Observe(3)
	if v := read(t, s, h); v != 5 {
		t.Fatalf("watermark reads %d after 5 and 3, want 5", v)
	}
	// A second session's handle marks from its own start: the two are
	// isolated, and a reset in one leaves the other alone.
	s2 := session(t)
	h2 := pvarHandle(t, s2, testHWM.Name(), pvar.ClassHighWatermark)
	if err := s2.Start(h2); err != nil {
		t.Fatal(err)
	}
	w.Observe(4)
	if v, v2 := read(t, s, h), read(t, s2, h2); v != 5 || v2 != 4 {
		t.Fatalf("sessions read %d, %d; want 5, 4", v, v2)
	}
	if err := s2.Reset(h2); err != nil {
		t.Fatal(err)
	}
	w.Observe(2)
	if v, v2 := read(t, s, h), read(t, s2, h2); v != 5 || v2 != 2 {
		t.Fatalf("after s2's reset, sessions read %d, %d; want 5, 2", v, v2)
	}
	// Stopped, a handle keeps its mark; started again, it goes on from it.
	if err := s.Stop(h); err != nil {
		t.Fatal(err)
	}
	w.Observe(7)
	if v, v2 := read(t, s, h), read(t, s2, h2); v != 5 || v2 != 7 {
		t.Fatalf("s stopped: sessions read %d, %d; want 5, 7", v, v2)
	}
	if err := s.Start(h); err != nil {
		t.Fatal(err)
	}
	w.Observe(6)
	if v := read(t, s, h); v != 6 {
		t.Fatalf("restarted watermark reads %d, want 6", v)
	}
	if err := s.Write(h, 40); err != nil {
		t.Fatal(err)
	}
	if v := read(t, s, h); v != 40 {
		t.Fatalf("watermark after Write(40) reads %d", v)
	}
	if _, err := s.ReadReset(h); !errors.Is(err, ErrPvarNoAtomic) {
		t.Errorf("ReadReset of a watermark = %v, want ErrPvarNoAtomic", err)
	}
	if testHWM.Value() != 50 {
		t.Errorf("the process's mark = %d, want 50: sessions change none", testHWM.Value())
	}
}

func TestWatermarkStartsAtLevel(t *testing.T) {
	initT(t)
	l := pvar.NewLevel(testname.Uniq("mpit_test_wlevel"), "a level")
	hw := pvar.NewHighWatermark(testname.Uniq("mpit_test_wlevel_hwm"), "its mark", pvar.WithLevel(l.Var))
	ls, hs := l.Shard(), hw.Shard()
	defer ls.Close()
	defer hs.Close()
	ls.Set(3)
	s := session(t)
	h := pvarHandle(t, s, hw.Name(), pvar.ClassHighWatermark)
	if err := s.Start(h); err != nil {
		t.Fatal(err)
	}
	if v := read(t, s, h); v != 3 {
		t.Fatalf("a started watermark reads %d, want the level 3", v)
	}
	ls.Set(1)
	if err := s.Stop(h); err != nil {
		t.Fatal(err)
	}
	if err := s.Reset(h); err != nil {
		t.Fatal(err)
	}
	if v := read(t, s, h); v != 1 {
		t.Fatalf("a stopped watermark after Reset reads %d, want the level 1", v)
	}
}

func TestWatermarkHandles(t *testing.T) {
	initT(t)
	hw := pvar.NewHighWatermark(testname.Uniq("mpit_test_many_hwm"), "x")
	i := mustIndex(t, hw.Name(), pvar.ClassHighWatermark)
	s := session(t)
	var hs []*PvarHandle
	for range pvar.Windows {
		h, _, err := s.HandleAlloc(i, nil)
		if err != nil {
			t.Fatal(err)
		}
		hs = append(hs, h)
	}
	if _, _, err := s.HandleAlloc(i, nil); !errors.Is(err, ErrOutOfHandles) {
		t.Fatalf("handle %d on one watermark = %v, want ErrOutOfHandles", pvar.Windows+1, err)
	}
	if err := s.FreeHandle(hs[0]); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.HandleAlloc(i, nil); err != nil {
		t.Fatalf("HandleAlloc after a free = %v", err)
	}
	// The final Finalize gives every window back.
	if err := Finalize(); err != nil {
		t.Fatal(err)
	}
	if err := Init(); err != nil {
		t.Fatal(err)
	}
	s2 := session(t)
	for range pvar.Windows {
		if _, _, err := s2.HandleAlloc(i, nil); err != nil {
			t.Fatalf("HandleAlloc after Finalize = %v", err)
		}
	}
}

func mustIndex(t *testing.T, name string, c Class) int {
	t.Helper()
	i, err := PvarIndex(name, c)
	if err != nil {
		t.Fatal(err)
	}
	return i
}

func TestLowWatermarkSessions(t *testing.T) {
	initT(t)
	l := pvar.NewLevel(testname.Uniq("mpit_test_low_level"), "a level")
	lw := pvar.NewLowWatermark(testname.Uniq("mpit_test_low"), "its low mark", pvar.WithLevel(l.Var))
	ls, ws := l.Shard(), lw.Shard()
	defer ls.Close()
	defer ws.Close()
	i := mustIndex(t, lw.Name(), pvar.ClassLowWatermark)
	if d, _ := PvarInfo(i); d.Continuous || d.ReadOnly || d.Atomic {
		t.Errorf("a low watermark: continuous %v, readonly %v, atomic %v", d.Continuous, d.ReadOnly, d.Atomic)
	}
	ls.Set(10)
	s, s2 := session(t), session(t)
	h := pvarHandle(t, s, lw.Name(), pvar.ClassLowWatermark)
	if v := read(t, s, h); v != math.MaxInt64 {
		t.Errorf("a never started low watermark reads %d, want MaxInt64", v)
	}
	if err := s.Start(h); err != nil {
		t.Fatal(err)
	}
	ws.Observe(4)
	h2 := pvarHandle(t, s2, lw.Name(), pvar.ClassLowWatermark)
	if err := s2.Start(h2); err != nil {
		t.Fatal(err)
	}
	ws.Observe(7)
	if v, v2 := read(t, s, h), read(t, s2, h2); v != 4 || v2 != 7 {
		t.Fatalf("sessions read %d, %d; want 4 and 7 (s2 started at the level 10, then 7)", v, v2)
	}
	if err := s.Stop(h); err != nil {
		t.Fatal(err)
	}
	ws.Observe(2)
	if v, v2 := read(t, s, h), read(t, s2, h2); v != 4 || v2 != 2 {
		t.Fatalf("s stopped: sessions read %d, %d; want 4, 2", v, v2)
	}
	if err := s.Write(h, 3); err != nil {
		t.Fatal(err)
	}
	if v := read(t, s, h); v != 3 {
		t.Fatalf("after Write(3): %d", v)
	}
	ls.Set(6)
	if err := s2.Reset(h2); err != nil {
		t.Fatal(err)
	}
	if v := read(t, s2, h2); v != 6 {
		t.Fatalf("after Reset: %d, want the level 6", v)
	}
}
