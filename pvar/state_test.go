package pvar

import (
	"slices"
	"testing"
)

// TestState: a state variable reads the highest state of its live shards,
// per owner and for the process, -1 with none; Set ignores an index out
// of range; MPI_T's class and the names of the states come with it.
func TestState(t *testing.T) {
	s := NewState("test_state_mode", "A test's modes.", []string{"good", "fair", "poor"})
	if s.Class() != ClassState || !slices.Equal(s.States(), []string{"good", "fair", "poor"}) {
		t.Fatalf("class %v states %v", s.Class(), s.States())
	}
	if v := s.Read(); v != -1 {
		t.Errorf("no shard: %d, want -1", v)
	}
	a, b := NewOwner(), NewOwner()
	x, y, z := s.ShardOf(a), s.ShardOf(a), s.ShardOf(b)
	x.Set(1)
	z.Set(2)
	y.Set(7) // out of range: stays 0
	if got := [...]int64{s.Read(), s.ReadAt(Key{Owner: a}), s.ReadAt(Key{Owner: b}), y.Load()}; got != [...]int64{2, 1, 2, 0} {
		t.Errorf("process, a, b, y: %v, want [2 1 2 0]", got)
	}
	z.Close()
	x.Close()
	if got := [...]int64{s.Read(), s.ReadAt(Key{Owner: a}), s.ReadAt(Key{Owner: b})}; got != [...]int64{0, 0, -1} {
		t.Errorf("after closes: %v, want [0 0 -1]", got)
	}
	y.Close()
	if NewLevel("test_state_level", "A level.").States() != nil {
		t.Error("a level has states")
	}
}

// TestStateSplit: ReadSplit of a state gives each owner's highest state
// and the highest of the rest, -1 where there is none; Merge keeps the
// higher.
func TestStateSplit(t *testing.T) {
	s := NewState("test_state_split", "A test's modes.", []string{"good", "fair", "poor"})
	a, b := NewOwner(), NewOwner()
	x, y := s.ShardOf(a), s.Shard()
	defer x.Close()
	defer y.Close()
	x.Set(2)
	y.Set(1)
	per := make([]int64, 3)
	rest := s.ReadSplit([]*Owner{a, b, nil}, per)
	if rest != 1 || per[0] != 2 || per[1] != -1 || per[2] != -1 {
		t.Errorf("ReadSplit: per %v rest %d, want [2 -1 -1] 1", per, rest)
	}
	if m := s.Merge(-1, 1); m != 1 {
		t.Errorf("Merge(-1, 1) = %d", m)
	}
}
