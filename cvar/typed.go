package cvar

import (
	"math"
	"strconv"
	"time"
)

// Int is a signed integer control variable.
type Int struct{ *Var }

// NewInt registers an integer variable.
func NewInt(name string, def int64, doc string, opts ...Option) Int {
	return Int{register(&Var{name: name, doc: doc, typ: TypeInt}, strconv.FormatInt(def, 10), opts)}
}

// Get returns the current value.
func (v Int) Get() int64 { return int64(v.load()) }

// Uint is an unsigned integer control variable.
type Uint struct{ *Var }

// NewUint registers an unsigned integer variable.
func NewUint(name string, def uint64, doc string, opts ...Option) Uint {
	return Uint{register(&Var{name: name, doc: doc, typ: TypeUint}, strconv.FormatUint(def, 10), opts)}
}

// Get returns the current value.
func (v Uint) Get() uint64 { return v.load() }

// Float is a floating-point control variable; it holds finite values only.
type Float struct{ *Var }

// NewFloat registers a floating-point variable.
func NewFloat(name string, def float64, doc string, opts ...Option) Float {
	return Float{register(&Var{name: name, doc: doc, typ: TypeFloat}, strconv.FormatFloat(def, 'g', -1, 64), opts)}
}

// Get returns the current value.
func (v Float) Get() float64 { return math.Float64frombits(v.load()) }

// Bool is a boolean control variable; it accepts the forms of
// strconv.ParseBool (1, t, true, 0, f, false, ...).
type Bool struct{ *Var }

// NewBool registers a boolean variable.
func NewBool(name string, def bool, doc string, opts ...Option) Bool {
	return Bool{register(&Var{name: name, doc: doc, typ: TypeBool}, strconv.FormatBool(def), opts)}
}

// Get returns the current value.
func (v Bool) Get() bool { return v.load() != 0 }

// String is a string control variable.
type String struct{ *Var }

// NewString registers a string variable.
func NewString(name, def, doc string, opts ...Option) String {
	return String{register(&Var{name: name, doc: doc, typ: TypeString}, def, opts)}
}

// Get returns the current value.
func (v String) Get() string { return *v.str.Load() }

// Duration is a time span control variable; it accepts the forms of
// time.ParseDuration ("50us", "1.5ms").
type Duration struct{ *Var }

// NewDuration registers a duration variable. WithRange bounds it in
// nanoseconds.
func NewDuration(name string, def time.Duration, doc string, opts ...Option) Duration {
	return Duration{register(&Var{name: name, doc: doc, typ: TypeDuration}, def.String(), opts)}
}

// Get returns the current value.
func (v Duration) Get() time.Duration { return time.Duration(v.load()) }

// Enum is a control variable that takes one of a fixed list of lowercase
// words.
type Enum struct{ *Var }

// NewEnum registers an enumeration whose value is one of choices.
func NewEnum(name, def string, choices []string, doc string, opts ...Option) Enum {
	v := &Var{name: name, doc: doc, typ: TypeEnum, choices: append([]string(nil), choices...)}
	return Enum{register(v, def, opts)}
}

// Get returns the current value, one of the choices.
func (v Enum) Get() string { return v.choices[v.load()] }

// Index returns the position of the current value among the choices.
func (v Enum) Index() int { return int(v.load()) }
