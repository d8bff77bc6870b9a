package mpit

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/tachyon-hpc/tachyon/cvar"
)

// CvarDesc describes a control variable (MPI_T_CVAR_GET_INFO). The
// description of a variable never changes.
type CvarDesc struct {
	Name      string    // unique among control variables
	Desc      string    // what it controls, and its unit if it has one
	Verbosity Verbosity // its audience
	Datatype  Datatype  // how reads and writes carry its value
	Enum      *Enum     // its values' names, for a TypeInt variable that has them; else nil
	Bind      Bind      // the type of object a handle binds it to
	Scope     Scope     // whether and how it may be written
}

// cvarEntry is a control variable of the interface's table.
type cvarEntry struct {
	v    *cvar.Var
	desc CvarDesc
}

// newCvarEntry describes v.
func newCvarEntry(v *cvar.Var) *cvarEntry {
	d := CvarDesc{Name: v.Name(), Desc: v.Doc(), Verbosity: cvarVerbosity(v.Verbosity()),
		Bind: BindNoObject, Scope: cvarScope(v.Scope())}
	if u := v.Unit(); u != "" {
		d.Desc += " (" + u + ")"
	}
	switch v.Type() {
	case cvar.TypeInt:
		d.Datatype = TypeCount
	case cvar.TypeUint:
		d.Datatype = TypeUnsignedLongLong
	case cvar.TypeFloat:
		d.Datatype = TypeDouble
	case cvar.TypeBool:
		d.Datatype = TypeInt
	case cvar.TypeString:
		d.Datatype = TypeChar
	case cvar.TypeDuration:
		d.Datatype = TypeCount
		d.Desc += " (nanoseconds)"
	case cvar.TypeEnum:
		d.Datatype = TypeInt
		d.Enum = &Enum{name: v.Name(), items: v.Choices()}
	}
	return &cvarEntry{v, d}
}

// CvarNum returns the number of control variables (MPI_T_CVAR_GET_NUM).
// It never decreases; the variables are indexed 0 to CvarNum()-1.
func CvarNum() (int, error) { return tableLen("CvarNum", &tables.cvars) }

// cvarAt returns the control variable of index i, or ErrInvalidIndex.
func cvarAt(op string, i int) (*cvarEntry, error) {
	tables.Lock()
	defer tables.Unlock()
	return entryAt(op, "control variable", &tables.cvars, i)
}

// CvarInfo describes the control variable of index i (MPI_T_CVAR_GET_INFO),
// the same way every time. It returns ErrInvalidIndex for an index outside
// [0, CvarNum()).
func CvarInfo(i int) (CvarDesc, error) {
	e, err := cvarAt("CvarInfo", i)
	if err != nil {
		return CvarDesc{}, err
	}
	return e.desc, nil
}

// CvarIndex returns the index of the control variable named name
// (MPI_T_CVAR_GET_INDEX), or ErrInvalidName if there is none.
func CvarIndex(name string) (int, error) {
	if _, err := current("CvarIndex"); err != nil {
		return 0, err
	}
	tables.Lock()
	defer tables.Unlock()
	i, ok := tables.cvarByName[name]
	if !ok {
		refresh()
		if i, ok = tables.cvarByName[name]; !ok {
			return 0, errorf(ErrInvalidName, "no control variable "+strconv.Quote(name))
		}
	}
	return i, nil
}

// CvarHandle is a handle on a control variable (MPI_T_cvar_handle), bound
// to an object if the variable requires one. It is valid from
// CvarHandleAlloc to Free or to the Finalize that ends the interface's
// current initialization.
type CvarHandle struct {
	e     *cvarEntry
	gen   uint64
	freed bool // under tables' lock
}

// CvarHandleAlloc allocates a handle on the control variable of index i
// (MPI_T_CVAR_HANDLE_ALLOC) and returns it with the number of values of
// its Datatype a read returns, which is 1 for every variable of the
// registry (a TypeChar value is one Go string). obj is the object the
// variable is bound to; it is ignored for a variable whose Bind is
// BindNoObject, which every control variable's is: each tunable is one
// setting for the whole process, none per communicator. It returns
// ErrInvalidIndex for an index outside [0, CvarNum()), and ErrInvalid for
// a bound variable's nil, wrongly typed or unusable object.
func CvarHandleAlloc(i int, obj Object) (*CvarHandle, int, error) {
	e, err := cvarAt("CvarHandleAlloc", i)
	if err != nil {
		return nil, 0, err
	}
	if _, err := bindKey("CvarHandleAlloc", e.desc.Name, e.desc.Bind, obj); err != nil {
		return nil, 0, err
	}
	g, err := current("CvarHandleAlloc")
	if err != nil {
		return nil, 0, err
	}
	return &CvarHandle{e: e, gen: g}, 1, nil
}

// check returns nil if h may be used by op.
func (h *CvarHandle) check(op string) error {
	if h == nil {
		return errorf(ErrInvalidHandle, op+" of a nil handle (MPI_T_CVAR_HANDLE_NULL)")
	}
	if err := checkGen(op, h.gen, ErrInvalidHandle); err != nil {
		return err
	}
	tables.Lock()
	defer tables.Unlock()
	if h.freed {
		return errorf(ErrInvalidHandle, op+" of a freed handle on "+h.e.desc.Name)
	}
	return nil
}

// Free frees the handle (MPI_T_CVAR_HANDLE_FREE); using it afterwards
// returns ErrInvalidHandle.
func (h *CvarHandle) Free() error {
	if err := h.check("CvarHandle.Free"); err != nil {
		return err
	}
	tables.Lock()
	defer tables.Unlock()
	h.freed = true
	return nil
}

// Desc returns the description of the handle's variable.
func (h *CvarHandle) Desc() CvarDesc { return h.e.desc }

// Read returns the variable's value (MPI_T_CVAR_READ) as the Go type of
// its Datatype: int64 for TypeCount, uint64 for TypeUnsignedLongLong,
// float64 for TypeDouble, int for TypeInt (an enumeration's item or a
// boolean's 0 or 1), string for TypeChar.
func (h *CvarHandle) Read() (any, error) {
	if err := h.check("CvarHandle.Read"); err != nil {
		return nil, err
	}
	v := h.e.v
	s := v.String()
	switch v.Type() {
	case cvar.TypeInt:
		n, _ := strconv.ParseInt(s, 10, 64)
		return n, nil
	case cvar.TypeUint:
		n, _ := strconv.ParseUint(s, 10, 64)
		return n, nil
	case cvar.TypeFloat:
		f, _ := strconv.ParseFloat(s, 64)
		return f, nil
	case cvar.TypeBool:
		if b, _ := strconv.ParseBool(s); b {
			return 1, nil
		}
		return 0, nil
	case cvar.TypeDuration:
		d, _ := time.ParseDuration(s)
		return int64(d), nil
	case cvar.TypeEnum:
		return slices.Index(h.e.desc.Enum.items, s), nil
	}
	return s, nil
}

// Write sets the variable's value (MPI_T_CVAR_WRITE) from the Go type of
// its Datatype, as Read returns it (an int is accepted for any integer
// Datatype). It returns
//
//   - ErrCvarSetNever for a ScopeConstant or ScopeReadonly variable;
//   - ErrCvarSetNotNow for a ScopeGroup, ScopeGroupEq, ScopeAll or
//     ScopeAllEq variable while the MPI environment runs (between mpi.Init
//     and mpi.Finalize): its processes must change it together, and
//     processes that already communicate cannot; write it before mpi.Init;
//   - ErrInvalid for a value of another Go type, out of the variable's
//     range, or not an item of its enumeration;
//
// and leaves the value as it was.
func (h *CvarHandle) Write(x any) error {
	if err := h.check("CvarHandle.Write"); err != nil {
		return err
	}
	d := h.e.desc
	if err := writableNow(d.Name, d.Scope); err != nil {
		return err
	}
	text, ok := cvarText(h.e, x)
	if !ok {
		return errorf(ErrInvalid, fmt.Sprintf("%s is %s: cannot write %T %v", d.Name, d.Datatype, x, x))
	}
	switch err := h.e.v.Set(text); {
	case err == nil:
		return nil
	case errors.Is(err, cvar.ErrReadOnly):
		return errorf(ErrCvarSetNever, err.Error())
	default:
		return errorf(ErrInvalid, err.Error())
	}
}

// cvarText returns x as the text cvar.Var.Set parses for e's variable, and
// false if x is not of the variable's Go type.
func cvarText(e *cvarEntry, x any) (string, bool) {
	var i int64
	var isInt bool
	switch n := x.(type) {
	case int:
		i, isInt = int64(n), true
	case int64:
		i, isInt = n, true
	}
	switch e.v.Type() {
	case cvar.TypeInt:
		return strconv.FormatInt(i, 10), isInt
	case cvar.TypeDuration:
		return time.Duration(i).String(), isInt
	case cvar.TypeUint:
		if u, ok := x.(uint64); ok {
			return strconv.FormatUint(u, 10), true
		}
		return strconv.FormatInt(i, 10), isInt && i >= 0
	case cvar.TypeFloat:
		f, ok := x.(float64)
		return strconv.FormatFloat(f, 'g', -1, 64), ok && !math.IsNaN(f)
	case cvar.TypeBool:
		return strconv.FormatBool(i == 1), isInt && (i == 0 || i == 1)
	case cvar.TypeEnum:
		items := e.desc.Enum.items
		if !isInt || i < 0 || i >= int64(len(items)) {
			return "", false
		}
		return items[i], true
	}
	s, ok := x.(string)
	return s, ok
}
