package mpi

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
)

// groupSeq returns the world ranks 0..n-1.
func groupSeq(n int) []int {
	r := make([]int, n)
	for i := range r {
		r[i] = i
	}
	return r
}

// groupMembers returns the world ranks of g (nil for an empty group).
func groupMembers(g *Group) []int {
	if len(g.ranks) == 0 {
		return nil
	}
	return slices.Clone(g.ranks)
}

// mustClass fails t unless err matches cls and no other class.
func mustClass(t *testing.T, err, cls error) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want %v", cls)
	}
	if !errors.Is(err, cls) {
		t.Fatalf("got %v, want class %v", err, cls)
	}
	for _, c := range classes {
		if c != cls && errors.Is(err, c) {
			t.Fatalf("%v also matches %v", err, c)
		}
	}
	var e *Error
	if !errors.As(err, &e) || e.Op == "" {
		t.Fatalf("%v is not an *Error naming its routine", err)
	}
}

func TestGroupSizeRank(t *testing.T) {
	for _, tc := range []struct {
		ranks    []int
		me       int
		wantRank int
	}{
		{groupSeq(5), 3, 3},
		{[]int{7, 2, 9}, 9, 2},
		{[]int{7, 2, 9}, 4, Undefined},
		{[]int{1000000, 3}, 3, 1}, // sparse: the map, not the table
		{[]int{1000000, 3}, 1000000, 0},
		{[]int{1000000, 3}, 999999, Undefined},
		{[]int{}, 0, Undefined},
	} {
		g := newGroup(tc.ranks, tc.me)
		if g.Size() != len(tc.ranks) {
			t.Errorf("%v: Size %d, want %d", tc.ranks, g.Size(), len(tc.ranks))
		}
		if g.Rank() != tc.wantRank {
			t.Errorf("%v as %d: Rank %d, want %d", tc.ranks, tc.me, g.Rank(), tc.wantRank)
		}
	}
	if GroupEmpty.Size() != 0 || GroupEmpty.Rank() != Undefined {
		t.Errorf("GroupEmpty: size %d rank %d", GroupEmpty.Size(), GroupEmpty.Rank())
	}
	var null *Group
	if null.Size() != 0 || null.Rank() != Undefined {
		t.Errorf("nil group: size %d rank %d", null.Size(), null.Rank())
	}
}

func TestGroupNewGroupCopiesAndIndexes(t *testing.T) {
	src := []int{4, 0, 2}
	g := newGroup(src, 0)
	src[0] = 1
	if g.worldRank(0) != 4 {
		t.Fatalf("newGroup kept the caller's slice")
	}
	// Every representation (identity, table, map) answers rankOf alike.
	for _, ranks := range [][]int{groupSeq(6), {5, 3, 1}, {1 << 40, 7, 1 << 20}} {
		g := newGroup(ranks, 0)
		for i, w := range ranks {
			if g.rankOf(w) != i || g.worldRank(i) != w {
				t.Errorf("%v: rankOf(%d) = %d, want %d", ranks, w, g.rankOf(w), i)
			}
		}
		for _, w := range []int{-1, ProcNull, Undefined, 6, 8, 1<<40 + 1, math.MaxInt} {
			if !slices.Contains(ranks, w) && g.rankOf(w) != Undefined {
				t.Errorf("%v: rankOf(%d) = %d, want Undefined", ranks, w, g.rankOf(w))
			}
		}
	}
	if g := newGroup(groupSeq(4), 0); g.table != nil || g.index != nil {
		t.Errorf("the identity group built an index")
	}
	for _, bad := range [][]int{{1, 2, 1}, {1 << 40, 1 << 40}, {-1}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("newGroup(%v) did not panic", bad)
				}
			}()
			newGroup(bad, 0)
		}()
	}
}

func TestGroupIncl(t *testing.T) {
	g := newGroup([]int{10, 11, 12, 13, 14}, 12)
	h, err := g.Incl([]int{4, 2, 0})
	if err != nil {
		t.Fatal(err)
	}
	if want := []int{14, 12, 10}; !slices.Equal(groupMembers(h), want) {
		t.Fatalf("Incl: %v, want %v", groupMembers(h), want)
	}
	if h.Rank() != 1 {
		t.Errorf("Incl: Rank %d, want 1", h.Rank())
	}
	if e, err := g.Incl(nil); err != nil || e != GroupEmpty {
		t.Errorf("Incl(nil) = %v, %v; want GroupEmpty", e, err)
	}
	for _, bad := range [][]int{{5}, {-1}, {ProcNull}, {1, 3, 1}} {
		_, err := g.Incl(bad)
		mustClass(t, err, ErrRank)
	}
}

func TestGroupExcl(t *testing.T) {
	g := newGroup([]int{10, 11, 12, 13, 14}, 11)
	h, err := g.Excl([]int{3, 0})
	if err != nil {
		t.Fatal(err)
	}
	if want := []int{11, 12, 14}; !slices.Equal(groupMembers(h), want) {
		t.Fatalf("Excl: %v, want %v", groupMembers(h), want)
	}
	if h.Rank() != 0 {
		t.Errorf("Excl: Rank %d, want 0", h.Rank())
	}
	if h, _ := g.Excl(nil); !slices.Equal(groupMembers(h), groupMembers(g)) {
		t.Errorf("Excl(nil) = %v", groupMembers(h))
	}
	if e, err := g.Excl(groupSeq(5)); err != nil || e != GroupEmpty {
		t.Errorf("Excl(all) = %v, %v; want GroupEmpty", e, err)
	}
	for _, bad := range [][]int{{5}, {-1}, {2, 2}} {
		_, err := g.Excl(bad)
		mustClass(t, err, ErrRank)
	}
}

func TestGroupRangeIncl(t *testing.T) {
	g := newGroup(groupSeq(10), 0)
	for _, tc := range []struct {
		ranges [][3]int
		want   []int
	}{
		{[][3]int{{0, 9, 2}}, []int{0, 2, 4, 6, 8}},
		{[][3]int{{0, 8, 3}}, []int{0, 3, 6}},
		{[][3]int{{9, 0, -4}}, []int{9, 5, 1}},
		{[][3]int{{3, 3, 1}, {5, 5, -7}}, []int{3, 5}},
		{[][3]int{{1, 2, 1}, {9, 7, -1}, {0, 0, 1}}, []int{1, 2, 9, 8, 7, 0}},
		{[][3]int{{4, 4, math.MaxInt}}, []int{4}},
		{[][3]int{{0, 9, math.MaxInt}}, []int{0}},
		{nil, nil},
	} {
		h, err := g.RangeIncl(tc.ranges)
		if err != nil {
			t.Errorf("RangeIncl(%v): %v", tc.ranges, err)
			continue
		}
		if !slices.Equal(groupMembers(h), tc.want) {
			t.Errorf("RangeIncl(%v) = %v, want %v", tc.ranges, groupMembers(h), tc.want)
		}
		// RangeIncl is Incl of the expanded ranks.
		if h2, _ := g.Incl(tc.want); !slices.Equal(groupMembers(h), groupMembers(h2)) {
			t.Errorf("RangeIncl(%v) differs from Incl", tc.ranges)
		}
	}
	for _, tc := range []struct {
		ranges [][3]int
		cls    error
	}{
		{[][3]int{{0, 5, 0}}, ErrArg},
		{[][3]int{{5, 0, 1}}, ErrArg},
		{[][3]int{{0, 5, -1}}, ErrArg},
		{[][3]int{{-1, 5, 1}}, ErrRank},
		{[][3]int{{0, 10, 1}}, ErrRank},
		{[][3]int{{10, 10, 1}}, ErrRank},
		{[][3]int{{0, 4, 2}, {4, 6, 1}}, ErrRank}, // 4 twice
		{[][3]int{{2, 2, 1}, {2, 2, 1}}, ErrRank},
	} {
		_, err := g.RangeIncl(tc.ranges)
		mustClass(t, err, tc.cls)
		_, err = g.RangeExcl(tc.ranges)
		mustClass(t, err, tc.cls)
	}
}

func TestGroupRangeExcl(t *testing.T) {
	g := newGroup([]int{9, 8, 7, 6, 5, 4, 3, 2, 1, 0}, 7)
	h, err := g.RangeExcl([][3]int{{0, 9, 3}, {8, 7, -1}})
	if err != nil {
		t.Fatal(err)
	}
	// Excluded ranks 0, 3, 6, 9, 8, 7; left 1, 2, 4, 5.
	if want := []int{8, 7, 5, 4}; !slices.Equal(groupMembers(h), want) {
		t.Fatalf("RangeExcl: %v, want %v", groupMembers(h), want)
	}
	if h.Rank() != 1 {
		t.Errorf("RangeExcl: Rank %d, want 1", h.Rank())
	}
	if e, err := g.RangeExcl([][3]int{{0, 9, 1}}); err != nil || e != GroupEmpty {
		t.Errorf("RangeExcl(all) = %v, %v", e, err)
	}
}

func TestGroupSetOps(t *testing.T) {
	a := newGroup([]int{1, 5, 3, 7}, 3)
	b := newGroup([]int{6, 7, 2, 1, 4}, 3)
	u, _ := GroupUnion(a, b)
	i, _ := GroupIntersection(a, b)
	d, _ := GroupDifference(a, b)
	if want := []int{1, 5, 3, 7, 6, 2, 4}; !slices.Equal(groupMembers(u), want) {
		t.Errorf("union %v, want %v", groupMembers(u), want)
	}
	if want := []int{1, 7}; !slices.Equal(groupMembers(i), want) {
		t.Errorf("intersection %v, want %v", groupMembers(i), want)
	}
	if want := []int{5, 3}; !slices.Equal(groupMembers(d), want) {
		t.Errorf("difference %v, want %v", groupMembers(d), want)
	}
	if u.Rank() != 2 || i.Rank() != Undefined || d.Rank() != 1 {
		t.Errorf("ranks: union %d, intersection %d, difference %d", u.Rank(), i.Rank(), d.Rank())
	}
	if e, _ := GroupDifference(a, a); e != GroupEmpty {
		t.Errorf("a minus a is not GroupEmpty")
	}
	// GroupEmpty does not know the caller; the union must take it from b.
	if u, _ := GroupUnion(GroupEmpty, b); !slices.Equal(groupMembers(u), groupMembers(b)) || u.Rank() != Undefined {
		t.Errorf("empty ∪ b = %v rank %d", groupMembers(u), u.Rank())
	}
	c := newGroup([]int{4, 9}, 9)
	if u, _ := GroupUnion(GroupEmpty, c); u.Rank() != 1 {
		t.Errorf("empty ∪ c: Rank %d, want 1", u.Rank())
	}
}

// TestGroupSetOpsModel checks union, intersection and difference, and the
// calling process's rank in each, against a plain model on random groups.
func TestGroupSetOpsModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	random := func(world, me int) *Group {
		// A random subset of a world of this size, in random order; big
		// worlds exercise the map.
		ranks := rng.Perm(world)[:rng.IntN(world+1)]
		return newGroup(ranks, me)
	}
	in := func(s []int, w int) bool { return slices.Contains(s, w) }
	for iter := range 3000 {
		world := 1 + rng.IntN(12)
		if iter%10 == 0 {
			world = 300
		}
		me := rng.IntN(world)
		a, b := random(world, me), random(world, me)
		if iter%7 == 0 {
			a = GroupEmpty
		}
		var wu, wi, wd []int
		wu = append(wu, groupMembers(a)...)
		for _, w := range groupMembers(b) {
			if !in(groupMembers(a), w) {
				wu = append(wu, w)
			}
		}
		for _, w := range groupMembers(a) {
			if in(groupMembers(b), w) {
				wi = append(wi, w)
			} else {
				wd = append(wd, w)
			}
		}
		for _, c := range []struct {
			name string
			op   func(a, b *Group) (*Group, error)
			want []int
		}{{"union", GroupUnion, wu}, {"intersection", GroupIntersection, wi}, {"difference", GroupDifference, wd}} {
			g, err := c.op(a, b)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(groupMembers(g), c.want) {
				t.Fatalf("%v %s %v = %v, want %v", groupMembers(a), c.name, groupMembers(b), groupMembers(g), c.want)
			}
			wantRank := slices.Index(c.want, me)
			if wantRank < 0 {
				wantRank = Undefined
			}
			if g.Rank() != wantRank {
				t.Fatalf("%v %s %v as %d: Rank %d, want %d", groupMembers(a), c.name, groupMembers(b), me, g.Rank(), wantRank)
			}
			if len(c.want) == 0 && g != GroupEmpty {
				t.Fatalf("empty %s is not GroupEmpty", c.name)
			}
		}
	}
}

func TestGroupCompare(t *testing.T) {
	a := newGroup([]int{1, 2, 3}, 0)
	for _, tc := range []struct {
		b    *Group
		want Comparison
	}{
		{a, Ident},
		{newGroup([]int{1, 2, 3}, 5), Ident},
		{newGroup([]int{3, 1, 2}, 0), Similar},
		{newGroup([]int{1, 2}, 0), Unequal},
		{newGroup([]int{1, 2, 4}, 0), Unequal},
		{GroupEmpty, Unequal},
	} {
		if got, err := GroupCompare(a, tc.b); err != nil || got != tc.want {
			t.Errorf("compare %v %v = %v, %v; want %v", groupMembers(a), groupMembers(tc.b), got, err, tc.want)
		}
		if got, _ := GroupCompare(tc.b, a); got != tc.want {
			t.Errorf("compare is not symmetric for %v", groupMembers(tc.b))
		}
	}
	if got, _ := GroupCompare(GroupEmpty, newGroup(nil, 0)); got != Ident {
		t.Errorf("two empty groups compare %d", got)
	}
}

func TestGroupTranslateRanks(t *testing.T) {
	a := newGroup([]int{4, 0, 2, 6}, 0)
	b := newGroup([]int{2, 3, 4}, 0)
	got, err := GroupTranslateRanks(a, []int{0, 1, 2, ProcNull, 3}, b)
	if err != nil {
		t.Fatal(err)
	}
	if want := []int{2, Undefined, 0, ProcNull, Undefined}; !slices.Equal(got, want) {
		t.Errorf("translate: %v, want %v", got, want)
	}
	if got, err := GroupTranslateRanks(a, nil, b); err != nil || len(got) != 0 {
		t.Errorf("translate of no ranks: %v, %v", got, err)
	}
	for _, bad := range []int{4, -1, AnySource, Undefined} {
		_, err := GroupTranslateRanks(a, []int{0, bad}, b)
		mustClass(t, err, ErrRank)
	}
	got, _ = GroupTranslateRanks(a, []int{0, 1}, GroupEmpty)
	if !slices.Equal(got, []int{Undefined, Undefined}) {
		t.Errorf("translate into GroupEmpty: %v", got)
	}
}

func TestGroupFree(t *testing.T) {
	g := newGroup([]int{0, 1, 2}, 1)
	h, _ := g.Incl([]int{1})
	if err := g.Free(); err != nil {
		t.Fatal(err)
	}
	mustClass(t, g.Free(), ErrGroup)
	if g.Size() != 0 || g.Rank() != Undefined {
		t.Errorf("freed group: size %d rank %d", g.Size(), g.Rank())
	}
	// A group derived before the Free is unaffected.
	if h.Size() != 1 || h.Rank() != 0 {
		t.Errorf("derived group broke: size %d rank %d", h.Size(), h.Rank())
	}
	// GroupEmpty may be freed, any number of times, and stays usable.
	for range 2 {
		if err := GroupEmpty.Free(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := GroupUnion(GroupEmpty, h); err != nil {
		t.Errorf("GroupEmpty after Free: %v", err)
	}
	// Only one of many concurrent Frees succeeds.
	k := newGroup([]int{0}, 0)
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok := 0
	for range 8 {
		wg.Go(func() {
			if k.Free() == nil {
				mu.Lock()
				ok++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if ok != 1 {
		t.Errorf("%d concurrent Frees succeeded", ok)
	}
}

// TestGroupBadGroup checks that every routine rejects a nil or freed group
// with ErrGroup.
func TestGroupBadGroup(t *testing.T) {
	freed := newGroup([]int{0, 1}, 0)
	freed.Free()
	good := newGroup([]int{0, 1}, 0)
	for _, bad := range []*Group{nil, freed} {
		calls := map[string]func() error{
			"Incl":      func() error { _, err := bad.Incl([]int{0}); return err },
			"Excl":      func() error { _, err := bad.Excl(nil); return err },
			"RangeIncl": func() error { _, err := bad.RangeIncl([][3]int{{0, 0, 1}}); return err },
			"RangeExcl": func() error { _, err := bad.RangeExcl(nil); return err },
			"Free":      func() error { return bad.Free() },
			"Union a":   func() error { _, err := GroupUnion(bad, good); return err },
			"Union b":   func() error { _, err := GroupUnion(good, bad); return err },
			"Inter a":   func() error { _, err := GroupIntersection(bad, good); return err },
			"Inter b":   func() error { _, err := GroupIntersection(good, bad); return err },
			"Diff a":    func() error { _, err := GroupDifference(bad, good); return err },
			"Diff b":    func() error { _, err := GroupDifference(good, bad); return err },
			"Compare a": func() error { _, err := GroupCompare(bad, good); return err },
			"Compare b": func() error { _, err := GroupCompare(good, bad); return err },
			"Trans a":   func() error { _, err := GroupTranslateRanks(bad, []int{0}, good); return err },
			"Trans b":   func() error { _, err := GroupTranslateRanks(good, []int{0}, bad); return err },
		}
		for name, call := range calls {
			t.Run(fmt.Sprintf("%s/nil=%v", name, bad == nil), func(t *testing.T) {
				mustClass(t, call(), ErrGroup)
			})
		}
	}
}

// TestGroupConcurrentReads reads one group from many goroutines, for the
// race detector.
func TestGroupConcurrentReads(t *testing.T) {
	g := newGroup([]int{3, 1, 4, 0, 2}, 4)
	other := newGroup([]int{0, 1}, 4)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				if g.Rank() != 2 || g.Size() != 5 {
					t.Error("wrong rank or size")
					return
				}
				if _, err := GroupUnion(g, other); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}

func ExampleGroup_RangeIncl() {
	Run(8, func(world *Comm) error {
		if world.Rank() != 6 {
			return nil // show one process's view
		}
		wg, err := world.Group()
		if err != nil {
			return err
		}
		defer wg.Free()

		even, _ := wg.RangeIncl([][3]int{{0, 7, 2}}) // world ranks 0, 2, 4, 6
		firstHalf, _ := wg.Excl([]int{4, 5, 6, 7})
		both, _ := GroupIntersection(even, firstHalf)
		either, _ := GroupUnion(firstHalf, even)
		fmt.Println("even:", even.Size(), "processes; my rank", even.Rank())
		fmt.Println("even, first half:", both.Size(), "processes; member:", both.Rank() != Undefined)

		// Where do world ranks 6 and 2 sit in the union?
		r, _ := GroupTranslateRanks(wg, []int{6, 2}, either)
		fmt.Println("world ranks 6, 2 in the union:", r)

		// The union taken the other way round has the same members in
		// another order.
		swapped, _ := GroupUnion(even, firstHalf)
		cmp, _ := GroupCompare(either, swapped)
		fmt.Println("similar:", cmp == Similar)
		return nil
	})
	// Output:
	// even: 4 processes; my rank 3
	// even, first half: 2 processes; member: false
	// world ranks 6, 2 in the union: [5 2]
	// similar: true
}

// TestTypedResults: thread levels and comparison results are types of
// their own that print their MPI names, and a level out of range is an
// argument error that leaves MPI uninitialized.
func TestTypedResults(t *testing.T) {
	for v, want := range map[fmt.Stringer]string{
		ThreadSingle: "ThreadSingle", ThreadMultiple: "ThreadMultiple", ThreadLevel(9): "ThreadLevel(9)",
		Ident: "Ident", Congruent: "Congruent", Similar: "Similar", Unequal: "Unequal", Comparison(-1): "Comparison(-1)",
	} {
		if got := v.String(); got != want {
			t.Errorf("%#v prints %q, want %q", v, got, want)
		}
	}
	if !(ThreadSingle < ThreadFunneled && ThreadFunneled < ThreadSerialized && ThreadSerialized < ThreadMultiple) {
		t.Error("thread levels out of order")
	}
	if _, err := InitThread(ThreadLevel(9)); !errors.Is(err, ErrArg) || !strings.Contains(err.Error(), "ThreadLevel(9)") || Initialized() {
		t.Fatalf("InitThread(ThreadLevel(9)): %v (initialized: %v)", err, Initialized())
	}
}
