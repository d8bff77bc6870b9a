// Package cvar is Tachyon's registry of control variables: every tunable of
// every layer, registered in one place with its name, type, default, scope
// and documentation.
//
// A control variable named "progress_spin" takes its value, when its package
// is initialised, from the environment variable TACHYON_PROGRESS_SPIN if that
// is set and valid, else from its default. Variables whose scope allows it
// may be changed later with Set; the registry is what the MPI tool
// information interface (MPI_T) lists and what tachyon's documentation
// tables are generated from, so a tunable that is not registered here does
// not exist.
//
// Reading a variable (Get) is one atomic load: packages read their knobs on
// hot paths without caching them.
//
// docs/tools.md lists every control variable, generated from this registry
// (go run ./internal/vardoc/gen).
package cvar

import (
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tachyon-hpc/tachyon/asm"
	"github.com/tachyon-hpc/tachyon/internal/registry"
)

// EnvPrefix starts the name of the environment variable that overrides a
// control variable's default.
const EnvPrefix = "TACHYON_"

// Errors returned by Set and reported by Problems.
var (
	// ErrReadOnly reports a Set of a variable whose scope does not allow
	// changes after start (ScopeConstant, ScopeReadonly).
	ErrReadOnly = errors.New("cvar: variable cannot be changed after start")
	// ErrInvalid reports a value that does not parse as the variable's type
	// or is not one of an enumeration's choices.
	ErrInvalid = errors.New("cvar: invalid value")
	// ErrRange reports a value outside the variable's range.
	ErrRange = errors.New("cvar: value out of range")
	// ErrUnknown reports a name that no variable is registered under.
	ErrUnknown = errors.New("cvar: no such control variable")
)

// Type is the type of a control variable's value.
type Type int

// Types of control variables.
const (
	TypeInt Type = iota
	TypeUint
	TypeFloat
	TypeBool
	TypeString
	TypeDuration
	TypeEnum
)

var typeNames = [...]string{"int", "uint", "float", "bool", "string", "duration", "enum"}

func (t Type) String() string { return enumString("Type", typeNames[:], t) }

// enumString is the String of v, of the integer type named typ whose
// values from 0 have names.
func enumString[T ~int](typ string, names []string, v T) string {
	if v < 0 || int(v) >= len(names) {
		return typ + "(" + strconv.Itoa(int(v)) + ")"
	}
	return names[v]
}

// Scope says when and where a variable may be changed, with the meanings of
// MPI_T's scopes.
type Scope int

// Scopes of control variables.
const (
	// ScopeConstant: the value never changes (it reports a fact).
	ScopeConstant Scope = iota
	// ScopeReadonly: set from the environment at start, then fixed.
	ScopeReadonly
	// ScopeLocal: may be changed at any time, in one process alone.
	ScopeLocal
	// ScopeGroup: may be changed, but must be set alike in a group of
	// processes that communicate.
	ScopeGroup
	// ScopeAll: may be changed, but must be set alike in every process of
	// the job.
	ScopeAll
)

var scopeNames = [...]string{"constant", "readonly", "local", "group", "all"}

func (s Scope) String() string { return enumString("Scope", scopeNames[:], s) }

// Verbosity ranks variables by audience and detail, as MPI_T does.
type Verbosity int

// Verbosity levels, from the basic knobs every user may turn to the
// internals only Tachyon's developers should touch.
const (
	UserBasic Verbosity = iota
	UserDetail
	UserAll
	TunerBasic
	TunerDetail
	TunerAll
	MPIDevBasic
	MPIDevDetail
	MPIDevAll
)

// Source says where a variable's current value came from.
type Source int

// Sources of values.
const (
	FromDefault Source = iota
	FromEnvironment
	FromSet
)

func (s Source) String() string {
	switch s {
	case FromDefault:
		return "default"
	case FromEnvironment:
		return "environment"
	case FromSet:
		return "set"
	}
	return "Source(" + strconv.Itoa(int(s)) + ")"
}

// An Option adjusts a variable's metadata at registration.
type Option func(*Var)

// WithScope sets the variable's scope. The default is ScopeLocal.
func WithScope(s Scope) Option { return func(v *Var) { v.scope = s } }

// WithVerbosity sets the variable's verbosity. The default is TunerBasic.
func WithVerbosity(l Verbosity) Option { return func(v *Var) { v.verbosity = l } }

// WithRange bounds an Int, Uint or Duration variable to [min, max]
// (durations in nanoseconds). Values outside are rejected with ErrRange.
func WithRange(min, max int64) Option {
	return func(v *Var) { v.min, v.max, v.ranged = min, max, true }
}

// WithUnit names the unit of a numeric variable ("bytes", "messages").
func WithUnit(unit string) Option { return func(v *Var) { v.unit = unit } }

// WithCategory files the variable under a category ("progress", "rings").
func WithCategory(c string) Option { return func(v *Var) { v.category = c } }

// Var is the registry's record of one control variable: its metadata and
// current value. The typed handles (Int, Bool, ...) returned by the New
// functions wrap a Var.
type Var struct {
	// Numeric, bool and enum values: written with sync/atomic (Set), read
	// with a relaxed load (asm.LoadRelaxed64), a plain load where that is
	// untorn, so that a Get among a hot path's checks stays a compare
	// there; sync/atomic's load is kept apart as a boolean of its own.
	// First, for the 64-bit alignment sync/atomic needs on 32-bit CPUs.
	bits uint64

	name, doc, category, unit string
	typ                       Type
	scope                     Scope
	verbosity                 Verbosity
	min, max                  int64
	ranged                    bool
	choices                   []string
	def                       string

	str    atomic.Pointer[string] // string values
	source atomic.Int32
	mu     sync.Mutex // serialises Set
}

// Name returns the variable's name, lowercase with underscores.
func (v *Var) Name() string { return v.name }

// Env returns the name of the environment variable that overrides it.
func (v *Var) Env() string { return EnvPrefix + strings.ToUpper(v.name) }

// Doc returns the variable's documentation.
func (v *Var) Doc() string { return v.doc }

// Type returns the type of the variable's value.
func (v *Var) Type() Type { return v.typ }

// Scope returns when the variable may be changed.
func (v *Var) Scope() Scope { return v.scope }

// Verbosity returns the variable's audience.
func (v *Var) Verbosity() Verbosity { return v.verbosity }

// Category returns the category the variable is filed under.
func (v *Var) Category() string { return v.category }

// Unit returns the unit of a numeric variable, "" if none.
func (v *Var) Unit() string { return v.unit }

// Choices returns the values an enumeration accepts, nil for other types.
func (v *Var) Choices() []string { return slices.Clone(v.choices) }

// Range returns the bounds of a ranged numeric variable and whether it has
// any.
func (v *Var) Range() (min, max int64, ok bool) { return v.min, v.max, v.ranged }

// Default returns the default value as text.
func (v *Var) Default() string { return v.def }

// Source returns where the current value came from.
func (v *Var) Source() Source { return Source(v.source.Load()) }

// Writable reports whether Set may change the variable.
func (v *Var) Writable() bool { return v.scope >= ScopeLocal }

// String returns the current value as text, in the form Set accepts.
func (v *Var) String() string {
	b := v.load()
	switch v.typ {
	case TypeInt:
		return strconv.FormatInt(int64(b), 10)
	case TypeUint:
		return strconv.FormatUint(b, 10)
	case TypeFloat:
		return strconv.FormatFloat(math.Float64frombits(b), 'g', -1, 64)
	case TypeBool:
		return strconv.FormatBool(b != 0)
	case TypeDuration:
		return time.Duration(b).String()
	case TypeEnum:
		return v.choices[b]
	case TypeString:
		return *v.str.Load()
	}
	return ""
}

// Set parses value as the variable's type and makes it the current value.
// It returns an error matching ErrReadOnly, ErrInvalid or ErrRange, and then
// leaves the value as it was.
func (v *Var) Set(value string) error {
	if !v.Writable() {
		return fmt.Errorf("%w: %s is %s", ErrReadOnly, v.name, v.scope)
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if err := v.store(value); err != nil {
		return err
	}
	v.source.Store(int32(FromSet))
	return nil
}

// store parses and stores value.
func (v *Var) store(value string) error {
	s := strings.TrimSpace(value)
	bad := func(err error) error {
		return fmt.Errorf("%w: %s=%q: want %s", ErrInvalid, v.name, value, v.want())
	}
	var b uint64
	switch v.typ {
	case TypeInt:
		n, err := strconv.ParseInt(s, 0, 64)
		if err != nil {
			return bad(err)
		}
		if err := v.check(n, s); err != nil {
			return err
		}
		b = uint64(n)
	case TypeUint:
		n, err := strconv.ParseUint(s, 0, 64)
		if err != nil {
			return bad(err)
		}
		if v.ranged && (n > math.MaxInt64 || int64(n) < v.min || int64(n) > v.max) {
			return v.rangeErr(s)
		}
		b = n
	case TypeFloat:
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return bad(err)
		}
		b = math.Float64bits(f)
	case TypeBool:
		t, err := strconv.ParseBool(s)
		if err != nil {
			return bad(err)
		}
		if t {
			b = 1
		}
	case TypeDuration:
		d, err := time.ParseDuration(s)
		if err != nil {
			return bad(err)
		}
		if err := v.check(int64(d), s); err != nil {
			return err
		}
		b = uint64(d)
	case TypeEnum:
		i := slices.Index(v.choices, strings.ToLower(s))
		if i < 0 {
			return bad(nil)
		}
		b = uint64(i)
	case TypeString:
		v.str.Store(&value)
		return nil
	}
	atomic.StoreUint64(&v.bits, b)
	return nil
}

// load returns the numeric, bool or enum value's bits (see Var.bits).
func (v *Var) load() uint64 { return asm.LoadRelaxed64(&v.bits) }

func (v *Var) check(n int64, s string) error {
	if v.ranged && (n < v.min || n > v.max) {
		return v.rangeErr(s)
	}
	return nil
}

func (v *Var) rangeErr(s string) error {
	if v.typ == TypeDuration {
		return fmt.Errorf("%w: %s=%s: want %v to %v", ErrRange, v.name, s, time.Duration(v.min), time.Duration(v.max))
	}
	return fmt.Errorf("%w: %s=%s: want %d to %d", ErrRange, v.name, s, v.min, v.max)
}

// want describes the accepted values, for error messages.
func (v *Var) want() string {
	switch v.typ {
	case TypeInt:
		return "an integer"
	case TypeUint:
		return "a non-negative integer"
	case TypeFloat:
		return "a finite number"
	case TypeBool:
		return "true or false"
	case TypeDuration:
		return "a duration such as 50us or 2ms"
	case TypeEnum:
		return "one of " + strings.Join(v.choices, ", ")
	}
	return "a string"
}

var (
	vars     registry.Registry[*Var]
	problems struct {
		sync.Mutex
		list []error
	}
)

// register validates the metadata, adds v to the registry and applies the
// environment override.
func register(v *Var, def string, opts []Option) *Var {
	v.scope, v.verbosity = ScopeLocal, TunerBasic
	for _, o := range opts {
		o(v)
	}
	v.def = def
	if !registry.ValidName(v.name) {
		panic("cvar: invalid control variable name " + strconv.Quote(v.name))
	}
	if err := v.store(def); err != nil {
		panic("cvar: bad default for " + v.name + ": " + err.Error())
	}
	if !vars.Add(v.name, v) {
		panic("cvar: control variable " + v.name + " registered twice")
	}
	if s, ok := os.LookupEnv(v.Env()); ok {
		if err := v.store(s); err != nil {
			problems.Lock()
			problems.list = append(problems.list,
				fmt.Errorf("%s ignored, default %s kept: %w", v.Env(), def, err))
			problems.Unlock()
		} else {
			v.source.Store(int32(FromEnvironment))
		}
	}
	return v
}

// Problems returns one error for each TACHYON_* environment variable that
// was set to a value its control variable rejects (the default was kept).
// Engines report them at start so that a typo does not pass silently.
func Problems() []error {
	problems.Lock()
	defer problems.Unlock()
	return slices.Clone(problems.list)
}

// Lookup returns the variable registered under name.
func Lookup(name string) (*Var, bool) { return vars.Lookup(name) }

// Set sets the variable registered under name, as Var.Set does.
func Set(name, value string) error {
	v, ok := Lookup(name)
	if !ok {
		return fmt.Errorf("%w: %q", ErrUnknown, name)
	}
	return v.Set(value)
}

// All returns every registered variable, sorted by category and name. The
// order is stable for the life of the process once all packages are
// initialised, so an index into it can serve as MPI_T's variable index.
func All() []*Var {
	all := vars.All()
	slices.SortStableFunc(all, func(a, b *Var) int { return strings.Compare(a.category, b.category) })
	return all
}
