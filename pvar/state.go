package pvar

import "github.com/tachyon-hpc/tachyon/asm"

// State is a value out of a fixed set of named states (MPI_T's state
// class), such as the mode a network link runs in. Each thing that is in
// a state (a link, a peer's path) takes a shard of its own and sets it;
// the variable reads the highest state among the live shards, of one
// owner (ReadAt) or of the process (Read), so that states listed from the
// best to the worst read as the worst any of them is in. With no live
// shard it reads -1: nothing is in any state.
type State struct {
	*Var
	set shardSet[StateShard]
}

// NewState registers a state variable whose value i names states[i].
func NewState(name, doc string, states []string, opts ...Option) *State {
	if len(states) == 0 {
		panic("pvar: state variable " + name + " has no states")
	}
	s := &State{}
	s.Var = register(name, doc, ClassState, s.Value, func(k Key) int64 { return s.ValueOf(k.Owner) }, opts)
	s.Var.ofOwner = s.ValueOf
	s.Var.states = append([]string(nil), states...)
	s.Var.split = s.split
	return s
}

// Value returns the highest state of the live shards, -1 if there are
// none.
func (s *State) Value() int64 { return s.ValueOf(nil) }

// ValueOf returns the highest state of o's live shards, -1 if there are
// none; for a nil o, Value.
func (s *State) ValueOf(o *Owner) int64 {
	v := int64(-1)
	s.set.each(func(x *StateShard) {
		if o == nil || x.owner == o {
			v = max(v, x.Load())
		}
	})
	return v
}

// split is ReadSplit for a state: each owner's highest state, and the
// highest of the shards no listed owner holds (-1 for none).
func (s *State) split(owners []*Owner, per []int64) int64 {
	at := ownerIndex(owners)
	for i := range per {
		per[i] = -1
	}
	rest := int64(-1)
	s.set.each(func(x *StateShard) {
		if i := at(x.owner); i >= 0 {
			per[i] = max(per[i], x.Load())
		} else {
			rest = max(rest, x.Load())
		}
	})
	return rest
}

// Shard returns a new part of the variable, in states[0], with no owner.
func (s *State) Shard() *StateShard { return s.ShardOf(nil) }

// ShardOf returns a new part of the variable, in states[0], read in o's
// value too (nil: no owner): one for each link or peer whose state it
// tells.
func (s *State) ShardOf(o *Owner) *StateShard {
	return s.set.add(&StateShard{shard[State]{of: s, owner: o}})
}

// StateShard is the state of one thing: one goroutine at a time sets it,
// without locked instructions. Close removes it: the thing is gone.
type StateShard struct{ shard[State] }

// Set puts the shard in state i, an index of the variable's states; an
// index out of range is ignored.
func (x *StateShard) Set(i int) {
	if i >= 0 && i < len(x.of.states) {
		asm.StoreRelaxed64(&x.v, uint64(i))
	}
}

// Load returns the shard's state.
func (x *StateShard) Load() int64 { return int64(asm.LoadAcquire64(&x.v)) }

// Close removes the shard from the variable.
func (x *StateShard) Close() { x.of.set.remove(x, func() {}) }
