package mpit

import (
	"strconv"

	"github.com/tachyon-hpc/tachyon/pvar"
)

// Class is the class of a performance variable (MPI_T_PVAR_CLASS_*); its
// values are pvar's classes, in MPI's order.
type Class = pvar.Class

// PvarDesc describes a performance variable (MPI_T_PVAR_GET_INFO). The
// description of a variable never changes.
type PvarDesc struct {
	Name      string    // unique among performance variables of its Class
	Desc      string    // what it measures, and its unit if it has one
	Verbosity Verbosity // its audience: VerbosityTunerBasic for every variable
	Class     Class     // its semantics, starting value and overflow
	Datatype  Datatype  // what MPI type its value is; reads carry an int64
	Enum      *Enum     // a state variable's names of its states (pvar.NewState); nil for other classes
	Bind      Bind      // the type of object a handle binds it to
	// ReadOnly: the variable cannot be written or reset (Session.Write,
	// Session.Reset return ErrPvarNoWrite).
	ReadOnly bool
	// Continuous: the variable is always active once a handle is
	// allocated and cannot be started or stopped (Session.Start,
	// Session.Stop return ErrPvarNoStartStop); otherwise a handle starts
	// stopped.
	Continuous bool
	// Atomic: Session.ReadReset reads and resets it atomically; otherwise
	// ReadReset returns ErrPvarNoAtomic.
	Atomic bool
}

// pvarEntry is a performance variable of the interface's table.
type pvarEntry struct {
	v    *pvar.Var
	desc PvarDesc
}

// sessional reports whether the class is measured per session: counted
// from zero at allocation or reset, while a handle is started.
func sessional(c Class) bool {
	return c == pvar.ClassCounter || c == pvar.ClassAggregate || c == pvar.ClassTimer
}

// windowed reports whether v is a watermark measured per session: a high
// or low watermark of pvar's, whose handles keep a pvar.Window each.
func windowed(v *pvar.Var) bool { return v.Watermark() != nil }

// newPvarEntry describes v.
func newPvarEntry(v *pvar.Var) *pvarEntry {
	c := v.Class()
	d := PvarDesc{Name: v.Name(), Desc: v.Doc(), Verbosity: pvarVerbosity, Class: c,
		Datatype: TypeUnsignedLongLong, Bind: v.Bind()}
	if u := v.Unit(); u != "" {
		d.Desc += " (" + u + ")"
	}
	switch c {
	case pvar.ClassState:
		d.Datatype = TypeInt
		d.Enum = &Enum{name: v.Name(), items: v.States()}
	case pvar.ClassPercentage:
		d.Datatype = TypeDouble
		d.Desc += " (read in millionths: 1000000 is all of the resource)"
	case pvar.ClassGeneric:
		d.Datatype = TypeCount
	}
	s := sessional(c)
	d.ReadOnly, d.Continuous, d.Atomic = !s, !s, s
	if windowed(v) {
		// Started, stopped and reset per session; a reset forgets what was
		// observed, so a read and a reset are not one atomic step.
		d.ReadOnly, d.Continuous, d.Atomic = false, false, false
	}
	return &pvarEntry{v, d}
}

// PvarNum returns the number of performance variables (MPI_T_PVAR_GET_NUM).
// It never decreases; the variables are indexed 0 to PvarNum()-1.
func PvarNum() (int, error) { return tableLen("PvarNum", &tables.pvars) }

// pvarAt returns the performance variable of index i, or ErrInvalidIndex.
func pvarAt(op string, i int) (*pvarEntry, error) {
	tables.Lock()
	defer tables.Unlock()
	return entryAt(op, "performance variable", &tables.pvars, i)
}

// PvarInfo describes the performance variable of index i
// (MPI_T_PVAR_GET_INFO), the same way every time. It returns
// ErrInvalidIndex for an index outside [0, PvarNum()).
func PvarInfo(i int) (PvarDesc, error) {
	e, err := pvarAt("PvarInfo", i)
	if err != nil {
		return PvarDesc{}, err
	}
	return e.desc, nil
}

// PvarIndex returns the index of the performance variable named name in
// class c (MPI_T_PVAR_GET_INDEX), or ErrInvalidName if there is none: a
// name that exists in another class only is not found.
func PvarIndex(name string, c Class) (int, error) {
	if _, err := current("PvarIndex"); err != nil {
		return 0, err
	}
	tables.Lock()
	defer tables.Unlock()
	k := pvarKey{name, c}
	i, ok := tables.pvarByKey[k]
	if !ok {
		refresh()
		if i, ok = tables.pvarByKey[k]; !ok {
			return 0, errorf(ErrInvalidName, "no "+c.String()+" performance variable "+strconv.Quote(name))
		}
	}
	return i, nil
}
