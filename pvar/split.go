package pvar

import "github.com/tachyon-hpc/tachyon/asm"

// ReadSplit reads the variable for several owners at once, as an exporter
// that shows one value per owner beside the process's does: per[i] gets
// the value for owners[i] (the rank it owns, all its communicators
// together: its shards, the closed ones included for a counter or
// watermark; for a variable NewBoundFunc registered, what its function
// computes for Key{Owner: owners[i]}), and it returns the rest: the part
// of the process-wide value (Read) no listed owner holds.
//
// For a counter the rest and per add up to Read's value at one moment
// (read under the counter's lock), so a counter's rest never decreases
// while the listed owners stay the same, and an owner dropped from the
// list moves its count into the rest; for a level they add up to Read's
// too. For a high watermark the rest is the highest mark of the shards no
// listed owner holds and of every closed shard; a low watermark's, the
// lowest. For a function bound to objects the rest is Read's value less
// the owners', never below zero when Read's is not; for a variable kept
// for the process only (NewFunc) every per is zero and the rest is Read's.
//
// For a state, per is each owner's highest state and the rest the highest
// of the shards no listed owner holds, -1 where there is none.
//
// per must be as long as owners. Owners must be distinct; nil ones get 0
// (-1 for a state).
func (v *Var) ReadSplit(owners []*Owner, per []int64) (rest int64) {
	per = per[:len(owners)]
	if v.split != nil {
		return v.split(owners, per)
	}
	clear(per)
	if v.readAt == nil {
		return v.read()
	}
	var sum int64
	for i, o := range owners {
		if o != nil {
			per[i] = v.readAt(Key{Owner: o})
			sum += per[i]
		}
	}
	total := v.read()
	rest = total - sum
	if total >= 0 && rest < 0 {
		rest = 0 // the owners' values were read after the total, and grew
	}
	return rest
}

// Merge returns the value of v for two disjoint sets of owners whose
// values are a and b (ReadSplit's): the larger for a high watermark, the
// smaller for a low one, the higher state for a state, the sum for every
// other class.
func (v *Var) Merge(a, b int64) int64 {
	switch v.class {
	case ClassHighWatermark, ClassState:
		return max(a, b)
	case ClassLowWatermark:
		return min(a, b)
	}
	return a + b
}

// ownerIndex returns a function that finds an owner's index in owners,
// -1 for one not listed (nil included).
func ownerIndex(owners []*Owner) func(*Owner) int {
	if len(owners) <= 8 {
		return func(o *Owner) int {
			for i, x := range owners {
				if x == o && o != nil {
					return i
				}
			}
			return -1
		}
	}
	m := make(map[*Owner]int, len(owners))
	for i, o := range owners {
		if o != nil {
			m[o] = i
		}
	}
	return func(o *Owner) int {
		if i, ok := m[o]; ok {
			return i
		}
		return -1
	}
}

// split is ReadSplit for a counter: one pass over its shards under its
// lock, so that the parts add up.
func (c *Counter) split(owners []*Owner, per []int64) int64 {
	idx := ownerIndex(owners)
	c.set.mu.Lock()
	defer c.set.mu.Unlock()
	total := c.shared.Load() + c.retired.Load()
	var sum uint64
	for i, o := range owners {
		per[i] = 0
		if o != nil {
			per[i] = o.retiredOf(c.Var)
			sum += uint64(per[i])
		}
	}
	c.set.each(func(s *CounterShard) {
		x := asm.LoadAcquire64(&s.v)
		total += x
		if i := idx(s.owner); i >= 0 {
			per[i] += int64(x)
			sum += x
		}
	})
	return int64(total - sum)
}

// split is ReadSplit for a level: one pass over its live shards.
func (l *Level) split(owners []*Owner, per []int64) int64 {
	idx := ownerIndex(owners)
	clear(per)
	rest := l.shared.Load()
	l.set.each(func(s *LevelShard) {
		x := int64(asm.LoadAcquire64(&s.v))
		if i := idx(s.owner); i >= 0 {
			per[i] += x
		} else {
			rest += x
		}
	})
	return rest
}

// split is ReadSplit for a high watermark's marks: one pass over its
// shards under its lock.
func (h *HighWatermark) split(owners []*Owner, per []int64) int64 {
	idx := ownerIndex(owners)
	h.set.mu.Lock()
	defer h.set.mu.Unlock()
	for i, o := range owners {
		per[i] = 0
		if o != nil {
			per[i] = o.retiredOf(h.Var)
		}
	}
	rest := max(h.shared.Load(), h.retired.Load())
	h.set.each(func(s *WatermarkShard) {
		x := int64(asm.LoadAcquire64(&s.v))
		if i := idx(s.owner); i >= 0 {
			per[i] = max(per[i], x)
		} else {
			rest = max(rest, x)
		}
	})
	if h.low {
		for i := range per {
			per[i] = h.FromMark(per[i])
		}
		rest = h.FromMark(rest)
	}
	return rest
}
