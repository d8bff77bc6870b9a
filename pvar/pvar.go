// Package pvar is Tachyon's registry of performance variables: every
// counter, level and high-watermark that a layer keeps about itself,
// registered in one place with its name, class and documentation.
//
// The registry is what the MPI tool information interface (MPI_T) exposes
// and what tests and benchmarks read. Writers update values on hot paths,
// so a writer that is the only one to touch its value (one engine, one
// endpoint) takes a shard of the variable and updates it with a plain load
// and an untorn plain store (asm.StoreRelaxed64): no locked instruction, no
// fence, no shared cache line. Readers sum (or, for watermarks, take the
// maximum of) the shards.
//
// A shard may name its Owner, the rank whose endpoint writes it (ShardOf):
// Read is the process-wide value, ReadAt(Key{Owner: o}) the value of o's
// shards alone, which is how the ranks of a world of goroutine ranks are
// told apart. An Owner may carry labels (SetLabels: package mpi gives
// each rank's owner its session's name and its peer), and an exporter
// reads every variable for the labeled owners (Labeled) at once, with
// the rest of the process's value beside them (ReadSplit): how
// metrics/prom shows one series per session and peer. A variable records
// the type of object it is bound to (WithBind): a tool reads a bound
// variable for one object at a time.
// High watermarks also keep windows (Window): marks since a start or reset
// of a tool's own, which writers keep up with one more load of their own
// cache line while no window is open.
//
// docs/tools.md lists every performance variable, generated from this
// registry; docs/mpit.md reads them as MPI_T does.
package pvar

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/tachyon-hpc/tachyon/asm"
	"github.com/tachyon-hpc/tachyon/internal/registry"
)

// Class is the kind of a performance variable, with the meanings of MPI_T's
// classes.
type Class int

// Classes of performance variables.
const (
	// ClassState: a value out of a fixed set of states.
	ClassState Class = iota
	// ClassLevel: the current use of a resource (messages queued).
	ClassLevel
	// ClassSize: the size of a resource (bytes of a buffer).
	ClassSize
	// ClassPercentage: a fraction of a resource in use.
	ClassPercentage
	// ClassHighWatermark: the largest value a level has reached.
	ClassHighWatermark
	// ClassLowWatermark: the smallest value a level has reached.
	ClassLowWatermark
	// ClassCounter: how many times something happened; never decreases.
	ClassCounter
	// ClassAggregate: a sum of values (bytes sent).
	ClassAggregate
	// ClassTimer: time spent, in clock counts.
	ClassTimer
	// ClassGeneric: anything else.
	ClassGeneric
)

var classNames = [...]string{"state", "level", "size", "percentage", "highwatermark",
	"lowwatermark", "counter", "aggregate", "timer", "generic"}

func (c Class) String() string {
	if c < 0 || int(c) >= len(classNames) {
		return "Class(" + strconv.Itoa(int(c)) + ")"
	}
	return classNames[c]
}

// Var is the registry's record of one performance variable.
type Var struct {
	name, doc, unit, category string
	class                     Class
	bind                      Bind
	read                      func() int64
	readAt                    func(Key) int64                          // nil: ReadAt is Read
	ofOwner                   func(*Owner) int64                       // a sharded variable's value for one owner (nil: all), even where WithReadAt replaced readAt
	split                     func(owners []*Owner, per []int64) int64 // a sharded variable's ReadSplit (split.go); nil for functions
	level                     *Var                                     // a watermark's level (WithLevel), nil if none
	windows                   *HighWatermark                           // the marks of the watermark this Var describes, nil if it is none
	states                    []string                                 // a State's names of its values, nil for other classes
}

// Name returns the variable's name, lowercase with underscores.
func (v *Var) Name() string { return v.name }

// Doc returns the variable's documentation.
func (v *Var) Doc() string { return v.doc }

// Class returns the variable's class.
func (v *Var) Class() Class { return v.class }

// Unit returns the unit of the value ("bytes", "messages"), "" if none.
func (v *Var) Unit() string { return v.unit }

// Category returns the category the variable is filed under: the part of
// its name before the first underscore.
func (v *Var) Category() string { return v.category }

// Bind returns the type of object the variable is bound to (WithBind),
// BindNoObject if it applies to the process as a whole.
func (v *Var) Bind() Bind { return v.bind }

// States returns the names of a state variable's values (NewState): the
// value i names States()[i]. It is nil for a variable of any other class.
func (v *Var) States() []string { return v.states }

// Read returns the variable's current value for the whole process.
func (v *Var) Read() int64 { return v.read() }

// ReadAt returns the variable's value for the object k names: for a
// variable registered with NewBoundFunc or WithReadAt, what its function
// computes for k; otherwise, for a counter, level or watermark, the
// shards of k.Owner alone (for a counter or watermark, what its closed
// shards counted included). The zero Key, or a variable kept for the
// process only (NewFunc), reads what Read does.
func (v *Var) ReadAt(k Key) int64 {
	if v.readAt == nil || k == (Key{}) {
		return v.read()
	}
	return v.readAt(k)
}

// Watermark returns the marks of the watermark v describes, on which a
// tool opens windows (HighWatermark.OpenWindow): a HighWatermark itself,
// or a LowWatermark's marks (whose windows read low values); nil if v is
// neither.
func (v *Var) Watermark() *HighWatermark { return v.windows }

// An Option adjusts a variable's metadata at registration.
type Option func(*Var)

// WithUnit names the unit of the value.
func WithUnit(unit string) Option { return func(v *Var) { v.unit = unit } }

// WithLevel names the level a high watermark marks: a window opened or
// reset on the watermark starts from the level's value then, as MPI_T
// requires of a watermark's starting value: for a Level, the value of the
// window's owner (the process's for none), as the watermark's shards are
// kept, whatever WithReadAt gives the level for one object; for any other
// Var, its ReadAt of the window's Key. Without it a window starts from
// zero.
func WithLevel(l *Var) Option { return func(v *Var) { v.level = l } }

// WithReadAt makes readAt compute the variable's value for one object
// (ReadAt with a Key other than the zero Key) in place of the registry's
// own per-owner value: for a variable whose writers keep a total that a
// structure of the object's can also tell apart, such as a queue's length
// per communicator.
func WithReadAt(readAt func(Key) int64) Option { return func(v *Var) { v.readAt = readAt } }

var vars registry.Registry[*Var]

// register makes and registers the Var of a variable of class c whose
// value read returns, and readAt for one object.
func register(name, doc string, c Class, read func() int64, readAt func(Key) int64, opts []Option) *Var {
	v := &Var{name: name, doc: doc, class: c, read: read, readAt: readAt}
	for _, o := range opts {
		o(v)
	}
	if !registry.ValidName(v.name) {
		panic("pvar: invalid performance variable name " + strconv.Quote(v.name))
	}
	if v.bind < BindNoObject || v.bind > BindInfo {
		panic("pvar: performance variable " + v.name + " bound to no known object type")
	}
	v.category, _, _ = strings.Cut(v.name, "_")
	if !vars.Add(v.name, v) {
		panic("pvar: performance variable " + v.name + " registered twice")
	}
	return v
}

// Lookup returns the variable registered under name.
func Lookup(name string) (*Var, bool) { return vars.Lookup(name) }

// All returns every registered variable sorted by name.
func All() []*Var { return vars.All() }

// Snapshot returns the current value of every variable, by name.
func Snapshot() map[string]int64 {
	m := make(map[string]int64)
	for _, v := range All() {
		m[v.name] = v.read()
	}
	return m
}

// Format returns the variables whose names start with prefix, one
// "name value unit" line each, for logs and debugging.
func Format(prefix string) string {
	var b strings.Builder
	for _, v := range All() {
		if strings.HasPrefix(v.name, prefix) {
			fmt.Fprintf(&b, "%s %d %s\n", v.name, v.read(), v.unit)
		}
	}
	return b.String()
}

// shardSet tracks the live shards of one variable.
type shardSet[S any] struct {
	mu     sync.Mutex
	shards atomic.Pointer[[]*S] // copy on write: readers do not lock
}

// add adds x to the set and returns it.
func (s *shardSet[S]) add(x *S) *S {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.addLocked(x)
	return x
}

// addLocked is add with s.mu held.
func (s *shardSet[S]) addLocked(x *S) {
	var next []*S
	if p := s.shards.Load(); p != nil {
		next = slices.Clone(*p)
	}
	next = append(next, x)
	s.shards.Store(&next)
}

// remove drops x and, under the set's lock, calls retire so that a value
// folded into a total never counts twice or goes missing for a reader.
func (s *shardSet[S]) remove(x *S, retire func()) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.shards.Load()
	if p == nil {
		return false
	}
	i := slices.Index(*p, x)
	if i < 0 {
		return false
	}
	retire()
	next := slices.Delete(slices.Clone(*p), i, i+1)
	s.shards.Store(&next)
	return true
}

func (s *shardSet[S]) each(f func(*S)) {
	if p := s.shards.Load(); p != nil {
		for _, x := range *p {
			f(x)
		}
	}
}

// shard is one writer's part of a variable of type V: its value, on a
// cache line of its own, the variable and the shard's owner.
type shard[V any] struct {
	_     pad
	v     uint64
	of    *V
	owner *Owner // nil: counted in the process-wide value only
	_     pad
}

// pad keeps a shard's value on a cache line of its own.
type pad [56]byte

// Counter counts events; its value never decreases.
type Counter struct {
	*Var
	shared  atomic.Uint64 // Add from any goroutine
	retired atomic.Uint64 // totals of closed shards
	set     shardSet[CounterShard]
}

// NewCounter registers a counter.
func NewCounter(name, doc string, opts ...Option) *Counter {
	return newCounter(name, doc, ClassCounter, opts)
}

// NewAggregate registers a sum of values (MPI_T's aggregate class): a
// Counter whose Adds are amounts, such as the entries each search
// compared, rather than events.
func NewAggregate(name, doc string, opts ...Option) *Counter {
	return newCounter(name, doc, ClassAggregate, opts)
}

// NewTimer registers a time spent, summed (MPI_T's timer class): a
// Counter whose Adds are durations in the TSC clock's counts
// (progress.CountsToSeconds converts them), so a writer adds the
// difference of two clock readings without converting.
func NewTimer(name, doc string, opts ...Option) *Counter {
	return newCounter(name, doc, ClassTimer, opts)
}

// newCounter registers a Counter of class c.
func newCounter(name, doc string, c Class, opts []Option) *Counter {
	k := &Counter{}
	k.Var = register(name, doc, c, func() int64 { return int64(k.Value()) },
		func(key Key) int64 { return int64(k.ValueOf(key.Owner)) }, opts)
	k.Var.split = k.split
	return k
}

// Add adds n from any goroutine, with an atomic add. Hot paths with a
// single writer use a shard instead.
func (c *Counter) Add(n uint64) { c.shared.Add(n) }

// Value returns the count so far.
func (c *Counter) Value() uint64 {
	c.set.mu.Lock() // a consistent view across a shard's Close
	defer c.set.mu.Unlock()
	v := c.shared.Load() + c.retired.Load()
	c.set.each(func(s *CounterShard) { v += asm.LoadAcquire64(&s.v) })
	return v
}

// ValueOf returns what o's shards counted, the closed ones included; for a
// nil o, Value.
func (c *Counter) ValueOf(o *Owner) uint64 {
	if o == nil {
		return c.Value()
	}
	c.set.mu.Lock()
	defer c.set.mu.Unlock()
	v := uint64(o.retiredOf(c.Var))
	c.set.each(func(s *CounterShard) {
		if s.owner == o {
			v += asm.LoadAcquire64(&s.v)
		}
	})
	return v
}

// Shard returns a new part of the counter for one writer at a time, with
// no owner.
func (c *Counter) Shard() *CounterShard { return c.ShardOf(nil) }

// ShardOf returns a new part of the counter for one writer at a time,
// counted in o's value too (nil: no owner).
func (c *Counter) ShardOf(o *Owner) *CounterShard {
	return c.set.add(&CounterShard{shard[Counter]{of: c, owner: o}})
}

// CounterShard is a part of a Counter that one goroutine at a time updates
// without locked instructions. Its count stays in the Counter after Close.
type CounterShard struct{ shard[Counter] }

// Add adds n. Only one goroutine at a time may update a shard.
func (s *CounterShard) Add(n uint64) { asm.StoreRelaxed64(&s.v, s.v+n) }

// Inc adds one.
func (s *CounterShard) Inc() { asm.StoreRelaxed64(&s.v, s.v+1) }

// AddAtomic adds n with an atomic add, for a shard that several
// goroutines update (an engine's waiters): a locked instruction each, on
// the shard's own cache line. Add and Inc on the same shard may not run
// while another goroutine may call AddAtomic (they would lose its adds);
// a writer that knows itself alone at times (an engine whose callers
// promised serial use) may use them then.
func (s *CounterShard) AddAtomic(n uint64) { atomic.AddUint64(&s.v, n) }

// Load returns the shard's own count.
func (s *CounterShard) Load() uint64 { return asm.LoadAcquire64(&s.v) }

// Close detaches the shard, keeping its count in the counter's total and
// its owner's. Updates after Close are not counted.
func (s *CounterShard) Close() {
	s.of.set.remove(s, func() {
		v := asm.LoadAcquire64(&s.v)
		s.of.retired.Add(v)
		s.owner.retire(s.of.Var, int64(v), false)
	})
}

// Level is the current use of a resource, which rises and falls.
type Level struct {
	*Var
	shared atomic.Int64
	set    shardSet[LevelShard]
}

// NewLevel registers a level.
func NewLevel(name, doc string, opts ...Option) *Level {
	l := &Level{}
	l.Var = register(name, doc, ClassLevel, l.Value, func(k Key) int64 { return l.ValueOf(k.Owner) }, opts)
	l.Var.ofOwner = l.ValueOf
	l.Var.split = l.split
	return l
}

// Add adds n (negative to lower it) from any goroutine.
func (l *Level) Add(n int64) { l.shared.Add(n) }

// Value returns the current level.
func (l *Level) Value() int64 {
	v := l.shared.Load()
	l.set.each(func(s *LevelShard) { v += int64(asm.LoadAcquire64(&s.v)) })
	return v
}

// ValueOf returns the sum of o's live shards; for a nil o, Value.
func (l *Level) ValueOf(o *Owner) int64 {
	if o == nil {
		return l.Value()
	}
	var v int64
	l.set.each(func(s *LevelShard) {
		if s.owner == o {
			v += int64(asm.LoadAcquire64(&s.v))
		}
	})
	return v
}

// Shard returns a new part of the level for one writer at a time, with no
// owner.
func (l *Level) Shard() *LevelShard { return l.ShardOf(nil) }

// ShardOf returns a new part of the level for one writer at a time,
// counted in o's value too (nil: no owner).
func (l *Level) ShardOf(o *Owner) *LevelShard {
	return l.set.add(&LevelShard{shard[Level]{of: l, owner: o}})
}

// LevelShard is a part of a Level that one goroutine at a time updates
// without locked instructions. Close removes its contribution: the resource
// it measured is gone.
type LevelShard struct{ shard[Level] }

// Set sets the shard's part of the level.
func (s *LevelShard) Set(v int64) { asm.StoreRelaxed64(&s.v, uint64(v)) }

// Add raises the shard's part by n.
func (s *LevelShard) Add(n int64) { asm.StoreRelaxed64(&s.v, s.v+uint64(n)) }

// Sub lowers the shard's part by n.
func (s *LevelShard) Sub(n int64) { asm.StoreRelaxed64(&s.v, s.v-uint64(n)) }

// Load returns the shard's part.
func (s *LevelShard) Load() int64 { return int64(asm.LoadAcquire64(&s.v)) }

// Close removes the shard and its contribution from the level.
func (s *LevelShard) Close() { s.of.set.remove(s, func() {}) }

// NewFunc registers a variable whose value read computes on demand, for
// values another structure already keeps (a queue's length).
func NewFunc(name, doc string, class Class, read func() int64, opts ...Option) *Var {
	return register(name, doc, class, read, nil, opts)
}

// NewBoundFunc registers a variable bound to objects of type bind whose
// value for the process read computes, and for one object readAt (given
// the object's Key, never the zero Key), both on demand: for values that
// a structure of the object's already keeps, such as the messages queued
// for one communicator.
func NewBoundFunc(name, doc string, class Class, bind Bind, read func() int64, readAt func(Key) int64, opts ...Option) *Var {
	return register(name, doc, class, read, readAt, append(opts, WithBind(bind)))
}
