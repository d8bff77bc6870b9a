package pvar

import (
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/tachyon-hpc/tachyon/internal/testname"
)

func TestCounterShards(t *testing.T) {
	name := testname.Uniq("test_counter")
	c := NewCounter(name, "counts things", WithUnit("things"))
	const writers, each = 4, 10000
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var last uint64
	var readerErr atomic.Value
	go func() { // a reader sees a count that never falls
		for {
			select {
			case <-stop:
				return
			default:
			}
			v := c.Value()
			if v < last {
				readerErr.Store("counter fell")
			}
			last = v
		}
	}()
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := c.Shard()
			for range each {
				s.Inc()
			}
			s.Add(5)
			if s.Load() != each+5 {
				t.Errorf("shard Load = %d", s.Load())
			}
			s.Close()
		}()
	}
	c.Add(7)
	wg.Wait()
	close(stop)
	if got, want := c.Value(), uint64(writers*(each+5)+7); got != want {
		t.Fatalf("Value = %d, want %d", got, want)
	}
	if e := readerErr.Load(); e != nil {
		t.Fatal(e)
	}
	v, ok := Lookup(name)
	if !ok || v.Class() != ClassCounter || v.Read() != int64(c.Value()) || v.Unit() != "things" || v.Category() != "test" {
		t.Fatalf("Lookup: %+v %v", v, ok)
	}
}

// TestCounterShardAddAtomic: a shard that several goroutines update with
// AddAtomic loses no add, counts for its owner, and keeps its count in
// the counter and the owner once closed.
func TestCounterShardAddAtomic(t *testing.T) {
	c := NewTimer(testname.Uniq("test_timer"), "time spent")
	o := NewOwner()
	s := c.ShardOf(o)
	const writers, each = 4, 10000
	var wg sync.WaitGroup
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				s.AddAtomic(3)
			}
		}()
	}
	wg.Wait()
	const want = writers * each * 3
	if got := s.Load(); got != want {
		t.Fatalf("shard Load = %d, want %d", got, want)
	}
	s.Close()
	if got, of := c.Value(), c.ValueOf(o); got != want || of != want {
		t.Fatalf("after Close: Value %d, ValueOf %d; want %d", got, of, want)
	}
	if c.Class() != ClassTimer {
		t.Errorf("NewTimer made a %v", c.Class())
	}
}

func TestLevelAndWatermark(t *testing.T) {
	l := NewLevel(testname.Uniq("test_level"), "a level")
	h := NewHighWatermark(testname.Uniq("test_high"), "a high-watermark")
	a, b := l.Shard(), l.Shard()
	ha, hb := h.Shard(), h.Shard()
	a.Set(10)
	b.Add(3)
	b.Sub(1)
	l.Add(-2)
	ha.Observe(10)
	ha.Observe(4)
	hb.Observe(7)
	if l.Value() != 10 || h.Value() != 10 {
		t.Fatalf("level %d, watermark %d; want 10, 10", l.Value(), h.Value())
	}
	a.Close()
	ha.Close()
	if l.Value() != 0 {
		t.Errorf("level after close = %d, want 0 (closed shard's part dropped)", l.Value())
	}
	if h.Value() != 10 {
		t.Errorf("watermark after close = %d, want 10 (kept)", h.Value())
	}
	h.Observe(12)
	if h.Value() != 12 {
		t.Errorf("watermark = %d, want 12", h.Value())
	}
	a.Close() // twice: harmless
}

func TestFuncAndRegistry(t *testing.T) {
	n := int64(3)
	name := testname.Uniq("test_func")
	NewFunc(name, "computed", ClassLevel, func() int64 { return n })
	n = 9
	if got := Snapshot()[name]; got != 9 {
		t.Fatalf("Snapshot %s = %d", name, got)
	}
	if !strings.Contains(Format(name), name+" 9") {
		t.Errorf("Format = %q", Format(name))
	}
	all := All()
	for i := 1; i < len(all); i++ {
		if all[i-1].Name() >= all[i].Name() {
			t.Fatalf("All not sorted: %s before %s", all[i-1].Name(), all[i].Name())
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("duplicate registration did not panic")
		}
	}()
	NewCounter(name, "again")
}

func TestShardAllocs(t *testing.T) {
	s := NewCounter(testname.Uniq("test_allocs"), "x").Shard()
	l := NewLevel(testname.Uniq("test_allocs_level"), "x").Shard()
	if n := testing.AllocsPerRun(1000, func() { s.Inc(); l.Add(1); l.Sub(1) }); n != 0 {
		t.Fatalf("shard updates allocate %v times", n)
	}
}

func BenchmarkCounterShardInc(b *testing.B) {
	s := NewCounter(testname.Uniq("bench_shard"), "x").Shard()
	for b.Loop() {
		s.Inc()
	}
}

func BenchmarkCounterAtomicAdd(b *testing.B) {
	c := NewCounter(testname.Uniq("bench_atomic"), "x")
	for b.Loop() {
		c.Add(1)
	}
}
