package pvar

import (
	"math"
	"slices"
	"sync"
	"testing"

	"github.com/tachyon-hpc/tachyon/internal/testname"
)

// TestLabels: an owner is listed with its labels, sorted by name, from
// SetLabels to Unlabel; new labels replace the old; bad labels change
// nothing.
func TestLabels(t *testing.T) {
	o1, o2 := NewOwner(), NewOwner()
	t.Cleanup(func() { o1.Unlabel(); o2.Unlabel() })
	find := func(o *Owner) ([]Label, bool) {
		for _, l := range Labeled() {
			if l.Owner == o {
				return l.Labels, true
			}
		}
		return nil, false
	}
	if _, ok := find(o1); ok || o1.Labels() != nil {
		t.Fatal("a new owner is labeled")
	}
	if err := o1.SetLabels(map[string]string{"session": "a", "peer": "world"}); err != nil {
		t.Fatal(err)
	}
	if err := o2.SetLabels(map[string]string{"session": "b"}); err != nil {
		t.Fatal(err)
	}
	want := []Label{{Name: "peer", Value: "world"}, {Name: "session", Value: "a"}}
	if got, ok := find(o1); !ok || !slices.Equal(got, want) || !slices.Equal(o1.Labels(), want) {
		t.Fatalf("o1's labels %v (listed %v), want %v", got, ok, want)
	}
	for _, bad := range []map[string]string{nil, {"Session": "a"}, {"peer-addr": "x"}, {"_x": "y"}, {"session": ""}} {
		if err := o1.SetLabels(bad); err == nil {
			t.Errorf("SetLabels(%v) took bad labels", bad)
		}
	}
	if got, _ := find(o1); !slices.Equal(got, want) {
		t.Fatalf("bad labels changed o1's to %v", got)
	}
	if err := o1.SetLabels(map[string]string{"session": "c"}); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, l := range Labeled() {
		if l.Owner == o1 {
			n++
		}
	}
	if got, _ := find(o1); n != 1 || !slices.Equal(got, []Label{{Name: "session", Value: "c"}}) {
		t.Fatalf("relabeled: listed %d times with %v", n, got)
	}
	o1.Unlabel()
	o1.Unlabel()
	if _, ok := find(o1); ok || o1.Labels() != nil {
		t.Fatal("o1 still labeled after Unlabel")
	}
	if _, ok := find(o2); !ok {
		t.Fatal("Unlabel of o1 dropped o2")
	}
	if err := (*Owner)(nil).SetLabels(map[string]string{"a": "b"}); err == nil {
		t.Fatal("a nil owner took labels")
	}
}

// TestReadSplit: each class's parts for listed owners and the rest add up
// as ReadSplit says, closed shards included, and Merge combines parts.
func TestReadSplit(t *testing.T) {
	c := NewCounter(testname.Uniq("test_split_counter"), "x", WithBind(BindComm))
	l := NewLevel(testname.Uniq("test_split_level"), "x", WithReadAt(func(Key) int64 { return -1 }))
	h := NewHighWatermark(testname.Uniq("test_split_hwm"), "x")
	lw := NewLowWatermark(testname.Uniq("test_split_lwm"), "x")
	f := NewFunc(testname.Uniq("test_split_func"), "x", ClassLevel, func() int64 { return 42 })
	bf := NewBoundFunc(testname.Uniq("test_split_bound"), "x", ClassLevel, BindComm, func() int64 { return 10 },
		func(k Key) int64 { return 3 })
	o1, o2, o3 := NewOwner(), NewOwner(), NewOwner()
	c1, c2, c3, c0 := c.ShardOf(o1), c.ShardOf(o2), c.ShardOf(o3), c.Shard()
	c1.Add(3)
	c2.Add(5)
	c3.Add(7)
	c0.Add(100)
	c.Add(1000)
	l.ShardOf(o1).Set(4)
	l.ShardOf(o3).Set(6)
	l.Add(2)
	h1, h3 := h.ShardOf(o1), h.ShardOf(o3)
	h1.Observe(4)
	h3.Observe(9)
	lw.ShardOf(o1).Observe(5)
	lw.ShardOf(o3).Observe(2)
	owners := []*Owner{o1, o2, nil}
	per := make([]int64, 3)
	for _, tc := range []struct {
		v    *Var
		rest int64
		per  []int64
	}{
		{c.Var, 1107, []int64{3, 5, 0}},
		{l.Var, 8, []int64{4, 0, 0}},
		{h.Var, 9, []int64{4, 0, 0}},
		{lw.Var, 2, []int64{5, math.MaxInt64, math.MaxInt64}},
		{f, 42, []int64{0, 0, 0}},
		{bf, 4, []int64{3, 3, 0}},
	} {
		per[2] = 99 // overwritten
		if rest := tc.v.ReadSplit(owners, per); rest != tc.rest || !slices.Equal(per, tc.per) {
			t.Errorf("%s: rest %d, per %v; want %d, %v", tc.v.Name(), rest, per, tc.rest, tc.per)
		}
	}
	// A closed shard's count stays its owner's; an owner left off the
	// list moves its count to the rest.
	c1.Close()
	h1.Close()
	if rest := c.ReadSplit(owners, per); rest != 1107 || per[0] != 3 {
		t.Errorf("after Close: rest %d, o1 %d; want 1107, 3", rest, per[0])
	}
	if rest := c.ReadSplit([]*Owner{o2}, per[:1]); rest != 1110 || per[0] != 5 {
		t.Errorf("o1 left off: rest %d, o2 %d; want 1110, 5", rest, per[0])
	}
	if rest := h.ReadSplit([]*Owner{o1}, per[:1]); rest != 9 || per[0] != 4 {
		t.Errorf("closed watermark shard: rest %d, o1 %d; want 9, 4", rest, per[0])
	}
	// A bound function's rest never goes below zero.
	if rest := bf.ReadSplit([]*Owner{o1, o2, o3, NewOwner()}, make([]int64, 4)); rest != 0 {
		t.Errorf("bound function's rest %d, want 0", rest)
	}
	// More owners than the linear search takes.
	many := make([]*Owner, 20)
	for i := range many {
		many[i] = NewOwner()
	}
	many[17] = o3
	big := make([]int64, len(many))
	if rest := c.ReadSplit(many, big); rest != 1108 || big[17] != 7 {
		t.Errorf("20 owners: rest %d, o3 %d; want 1108, 7", rest, big[17])
	}
	for _, m := range []struct {
		v       *Var
		a, b, w int64
	}{{c.Var, 3, 5, 8}, {l.Var, 3, 5, 8}, {h.Var, 3, 5, 5}, {lw.Var, 3, 5, 3}} {
		if got := m.v.Merge(m.a, m.b); got != m.w {
			t.Errorf("%s.Merge(%d, %d) = %d, want %d", m.v.Name(), m.a, m.b, got, m.w)
		}
	}
}

// TestReadSplitRace: a counter's parts add up to its total while shards
// count, open and close (run it under -race).
func TestReadSplitRace(t *testing.T) {
	c := NewCounter(testname.Uniq("test_split_race"), "x", WithBind(BindComm))
	owners := []*Owner{NewOwner(), NewOwner()}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for g := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				s := c.ShardOf(owners[g])
				for range 100 {
					s.Inc()
				}
				s.Close()
			}
		}()
	}
	per := make([]int64, 2)
	var last int64
	for range 2000 {
		rest := c.ReadSplit(owners, per)
		total := rest + per[0] + per[1]
		if rest != 0 || total < last {
			t.Fatalf("rest %d, total %d after %d", rest, total, last)
		}
		last = total
	}
	close(stop)
	wg.Wait()
}
