package mpi

import (
	"slices"
	"strconv"
	"sync/atomic"
)

// Process groups (the 1993 MPI1 proposal's groups, with the MPI-4 group
// routines).
//
// A Group is an ordered set of processes: group rank i is the process with
// world rank ranks[i]. Groups are local objects: building one never
// communicates, so each process builds the groups it needs on its own, and
// communicators are then made from them. A group is immutable once built;
// only Free changes it, by marking it freed.

// Comparison is how two groups or two communicators relate: the result of
// GroupCompare and Comm.Compare.
type Comparison int

// Comparisons.
const (
	Ident     Comparison = 0 // MPI_IDENT: same members in the same order (for communicators: the same communicator)
	Congruent Comparison = 1 // MPI_CONGRUENT: communicators with identical groups but different contexts
	Similar   Comparison = 2 // MPI_SIMILAR: same members in a different order
	Unequal   Comparison = 3 // MPI_UNEQUAL: anything else
)

var comparisonNames = [...]string{"Ident", "Congruent", "Similar", "Unequal"}

func (c Comparison) String() string {
	if c >= 0 && int(c) < len(comparisonNames) {
		return comparisonNames[c]
	}
	return "Comparison(" + strconv.Itoa(int(c)) + ")"
}

// Group is an ordered set of processes (MPI_Group). Group rank i names the
// i-th process of the set. The nil *Group plays the role of
// MPI_GROUP_NULL: routines given it return ErrGroup.
//
// A Group may be read from several goroutines at once; it is never
// modified after it is built, except that Free marks it freed.
type Group struct {
	ranks []int // world rank of each group rank; distinct
	me    int   // the calling process's world rank

	// Group rank of a world rank. Neither is set when the group is the
	// identity 0..n-1. Otherwise table, indexed by world rank (-1: absent),
	// when the world ranks are small enough for it to cost O(Size), else
	// index.
	table []int32
	index map[int]int

	freed     atomic.Bool
	permanent bool // GroupEmpty: Free leaves it usable
}

// GroupEmpty is the group with no members (MPI_GROUP_EMPTY). The group
// constructors return it for an empty result. Freeing it is allowed (as
// MPICH allows) and does nothing, so that code that frees every group it
// was handed stays correct.
var GroupEmpty = &Group{me: Undefined, permanent: true}

// newGroup returns the group whose rank i is world rank worldRanks[i], as
// seen by the process with world rank me. The slice is copied. The ranks
// must be distinct and non-negative: newGroup panics otherwise, since only
// the package's own code calls it.
func newGroup(worldRanks []int, me int) *Group {
	g := &Group{ranks: slices.Clone(worldRanks), me: me}
	if g.ranks == nil {
		g.ranks = []int{}
	}
	ident, hi := true, -1
	for i, w := range g.ranks {
		if w < 0 {
			panic("mpi: newGroup: negative world rank")
		}
		ident = ident && w == i
		hi = max(hi, w)
	}
	switch {
	case ident:
	case hi < 4*len(g.ranks)+64:
		g.table = make([]int32, hi+1)
		for i := range g.table {
			g.table[i] = -1
		}
		for i, w := range g.ranks {
			if g.table[w] >= 0 {
				panic("mpi: newGroup: duplicate world rank")
			}
			g.table[w] = int32(i)
		}
	default:
		g.index = make(map[int]int, len(g.ranks))
		for i, w := range g.ranks {
			if _, dup := g.index[w]; dup {
				panic("mpi: newGroup: duplicate world rank")
			}
			g.index[w] = i
		}
	}
	return g
}

// derive returns the group of the given world ranks as seen by the same
// process as g, or GroupEmpty when there are none.
func (g *Group) derive(worldRanks []int) *Group {
	if len(worldRanks) == 0 {
		return GroupEmpty
	}
	return newGroup(worldRanks, g.me)
}

// worldRank returns the world rank of group rank i, which must be valid.
func (g *Group) worldRank(i int) int { return g.ranks[i] }

// worldRanks returns the world ranks of the group, in group order. The
// caller must not modify the slice.
func (g *Group) worldRanks() []int { return g.ranks }

// rankOf returns the group rank of the process with world rank world, or
// Undefined if it is not a member. It takes constant time.
func (g *Group) rankOf(world int) int {
	switch {
	case world < 0:
		return Undefined
	case g.table != nil:
		if world < len(g.table) && g.table[world] >= 0 {
			return int(g.table[world])
		}
		return Undefined
	case g.index != nil:
		if r, ok := g.index[world]; ok {
			return r
		}
		return Undefined
	case world < len(g.ranks):
		return world // identity
	default:
		return Undefined
	}
}

// check returns an ErrGroup error for op if g is nil or freed.
func (g *Group) check(op string) error {
	if g == nil {
		return errorf(ErrGroup, op, "nil group (MPI_GROUP_NULL)")
	}
	if g.freed.Load() {
		return errorf(ErrGroup, op, "group used after Free")
	}
	return nil
}

// Size returns the number of processes in the group (MPI_GROUP_SIZE). It is
// 0 for GroupEmpty, and also for a nil or freed group, whose use MPI calls
// erroneous; routines that can return an error report those with ErrGroup.
func (g *Group) Size() int {
	if g.check("GroupSize") != nil {
		return 0
	}
	return len(g.ranks)
}

// Rank returns the calling process's rank in the group (MPI_GROUP_RANK), or
// Undefined if it is not a member. A nil or freed group also gives
// Undefined.
func (g *Group) Rank() int {
	if g.check("GroupRank") != nil {
		return Undefined
	}
	return g.rankOf(g.me)
}

// Free releases the group (MPI_GROUP_FREE). Afterwards every routine given
// the group returns ErrGroup; communicators built from it are not
// affected. Freeing a nil group, or a group twice, returns ErrGroup.
// Freeing GroupEmpty is allowed and does nothing.
func (g *Group) Free() (err error) {
	defer selfHandles(&err)
	if err := g.check("GroupFree"); err != nil {
		return err
	}
	if g.permanent {
		return nil
	}
	if !g.freed.CompareAndSwap(false, true) {
		return errorf(ErrGroup, "GroupFree", "group already freed")
	}
	return nil
}

// Incl returns the group of the processes whose ranks in g are listed in
// ranks, in that order (MPI_GROUP_INCL): rank i of the new group is rank
// ranks[i] of g. It is how a subset of a communicator's processes is
// picked, and renumbered, before making a communicator of them. Each entry
// must be a valid rank of g, and the entries distinct, or Incl returns
// ErrRank. No ranks give GroupEmpty.
func (g *Group) Incl(ranks []int) (_ *Group, err error) {
	defer selfHandles(&err)
	const op = "GroupIncl"
	if err := g.check(op); err != nil {
		return nil, err
	}
	seen := make([]bool, len(g.ranks))
	out := make([]int, len(ranks))
	for i, r := range ranks {
		if err := g.markRank(op, seen, r); err != nil {
			return nil, err
		}
		out[i] = g.ranks[r]
	}
	return g.derive(out), nil
}

// Excl returns the group of the processes of g whose ranks are not listed
// in ranks, in their order in g (MPI_GROUP_EXCL). Each entry must be a
// valid rank of g, and the entries distinct, or Excl returns ErrRank.
func (g *Group) Excl(ranks []int) (_ *Group, err error) {
	defer selfHandles(&err)
	const op = "GroupExcl"
	if err := g.check(op); err != nil {
		return nil, err
	}
	seen := make([]bool, len(g.ranks))
	for _, r := range ranks {
		if err := g.markRank(op, seen, r); err != nil {
			return nil, err
		}
	}
	return g.derive(g.unmarked(seen)), nil
}

// RangeIncl is Incl with the ranks given as ranges (MPI_GROUP_RANGE_INCL):
// each triplet {first, last, stride} stands for the ranks first,
// first+stride, ... up to last (down to last for a negative stride), and
// the new group holds the processes of those ranks in the order the
// triplets list them. It keeps regular selections, such as every other
// process, short to write.
//
// A zero stride, or a stride that leads away from last (first < last with
// a negative stride, or first > last with a positive one), returns ErrArg;
// a first or last outside g, or a rank listed twice, returns ErrRank.
func (g *Group) RangeIncl(ranges [][3]int) (_ *Group, err error) {
	defer selfHandles(&err)
	const op = "GroupRangeIncl"
	if err := g.check(op); err != nil {
		return nil, err
	}
	seen := make([]bool, len(g.ranks))
	var out []int
	for _, t := range ranges {
		if err := checkRange(op, t, len(g.ranks)); err != nil {
			return nil, err
		}
		for k := range rangeLen(t) {
			r := t[0] + k*t[2]
			if err := g.markRank(op, seen, r); err != nil {
				return nil, err
			}
			out = append(out, g.ranks[r])
		}
	}
	return g.derive(out), nil
}

// RangeExcl is Excl with the ranks given as ranges (MPI_GROUP_RANGE_EXCL),
// read as in RangeIncl: the new group holds the processes of g outside
// every range, in their order in g. Its errors are those of RangeIncl.
func (g *Group) RangeExcl(ranges [][3]int) (_ *Group, err error) {
	defer selfHandles(&err)
	const op = "GroupRangeExcl"
	if err := g.check(op); err != nil {
		return nil, err
	}
	seen := make([]bool, len(g.ranks))
	for _, t := range ranges {
		if err := checkRange(op, t, len(g.ranks)); err != nil {
			return nil, err
		}
		for k := range rangeLen(t) {
			if err := g.markRank(op, seen, t[0]+k*t[2]); err != nil {
				return nil, err
			}
		}
	}
	return g.derive(g.unmarked(seen)), nil
}

// markRank checks that r is a rank of g not yet in seen, and adds it.
func (g *Group) markRank(op string, seen []bool, r int) error {
	if r < 0 || r >= len(g.ranks) {
		return errorf(ErrRank, op, "rank %d is not in a group of size %d", r, len(g.ranks))
	}
	if seen[r] {
		return errorf(ErrRank, op, "rank %d listed twice", r)
	}
	seen[r] = true
	return nil
}

// unmarked returns the world ranks of the group ranks not in seen, in
// group order.
func (g *Group) unmarked(seen []bool) []int {
	var out []int
	for i, w := range g.ranks {
		if !seen[i] {
			out = append(out, w)
		}
	}
	return out
}

// checkRange checks a {first, last, stride} triplet against a group of
// size n.
func checkRange(op string, t [3]int, n int) error {
	first, last, stride := t[0], t[1], t[2]
	switch {
	case first < 0 || first >= n:
		return errorf(ErrRank, op, "range start %d is not in a group of size %d", first, n)
	case last < 0 || last >= n:
		return errorf(ErrRank, op, "range end %d is not in a group of size %d", last, n)
	case stride == 0:
		return errorf(ErrArg, op, "range {%d, %d, %d} has a zero stride", first, last, stride)
	case stride > 0 && first > last || stride < 0 && first < last:
		return errorf(ErrArg, op, "range {%d, %d, %d}: the stride leads away from the end", first, last, stride)
	}
	return nil
}

// rangeLen returns the number of ranks a triplet that passed checkRange
// stands for. Stepping by index rather than by adding the stride keeps a
// stride near the int limit from overflowing.
func rangeLen(t [3]int) int { return (t[1]-t[0])/t[2] + 1 }

// checkPair checks both operands of a two-group routine.
func checkPair(op string, a, b *Group) error {
	if err := a.check(op); err != nil {
		return err
	}
	return b.check(op)
}

// GroupUnion returns the processes of a followed by those of b that are not
// in a, each part in its own group's order (MPI_GROUP_UNION). A nil or
// freed operand returns ErrGroup.
func GroupUnion(a, b *Group) (_ *Group, err error) {
	defer selfHandles(&err)
	if err := checkPair("GroupUnion", a, b); err != nil {
		return nil, err
	}
	out := slices.Clone(a.ranks)
	for _, w := range b.ranks {
		if a.rankOf(w) == Undefined {
			out = append(out, w)
		}
	}
	if len(out) == 0 {
		return GroupEmpty, nil
	}
	// GroupEmpty does not know the calling process; the other operand does.
	me := a.me
	if a == GroupEmpty {
		me = b.me
	}
	return newGroup(out, me), nil
}

// GroupIntersection returns the processes of a that are also in b, in their
// order in a (MPI_GROUP_INTERSECTION). A nil or freed operand returns
// ErrGroup.
func GroupIntersection(a, b *Group) (_ *Group, err error) {
	defer selfHandles(&err)
	if err := checkPair("GroupIntersection", a, b); err != nil {
		return nil, err
	}
	var out []int
	for _, w := range a.ranks {
		if b.rankOf(w) != Undefined {
			out = append(out, w)
		}
	}
	return a.derive(out), nil
}

// GroupDifference returns the processes of a that are not in b, in their
// order in a (MPI_GROUP_DIFFERENCE). A nil or freed operand returns
// ErrGroup.
func GroupDifference(a, b *Group) (_ *Group, err error) {
	defer selfHandles(&err)
	if err := checkPair("GroupDifference", a, b); err != nil {
		return nil, err
	}
	var out []int
	for _, w := range a.ranks {
		if b.rankOf(w) == Undefined {
			out = append(out, w)
		}
	}
	return a.derive(out), nil
}

// GroupCompare compares two groups (MPI_GROUP_COMPARE): Ident if they have
// the same members in the same order, Similar if the same members in
// another order, Unequal otherwise. (Congruent only arises between
// communicators.) A nil or freed operand returns ErrGroup.
func GroupCompare(a, b *Group) (_ Comparison, err error) {
	defer selfHandles(&err)
	if err := checkPair("GroupCompare", a, b); err != nil {
		return Unequal, err
	}
	if len(a.ranks) != len(b.ranks) {
		return Unequal, nil
	}
	if slices.Equal(a.ranks, b.ranks) {
		return Ident, nil
	}
	for _, w := range a.ranks {
		if b.rankOf(w) == Undefined {
			return Unequal, nil
		}
	}
	return Similar, nil
}

// GroupTranslateRanks returns, for each rank of a listed in ranks, the rank
// of the same process in b, or Undefined if it is not in b
// (MPI_GROUP_TRANSLATE_RANKS). It is how a rank in one communicator is
// found in another. ProcNull translates to ProcNull. A rank outside a
// returns ErrRank; a nil or freed group returns ErrGroup.
func GroupTranslateRanks(a *Group, ranks []int, b *Group) (_ []int, err error) {
	defer selfHandles(&err)
	const op = "GroupTranslateRanks"
	if err := checkPair(op, a, b); err != nil {
		return nil, err
	}
	out := make([]int, len(ranks))
	for i, r := range ranks {
		switch {
		case r == ProcNull:
			out[i] = ProcNull
		case r < 0 || r >= len(a.ranks):
			return nil, errorf(ErrRank, op, "rank %d is not in a group of size %d", r, len(a.ranks))
		default:
			out[i] = b.rankOf(a.ranks[r])
		}
	}
	return out, nil
}
