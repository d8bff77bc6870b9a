package mpit

import "strconv"

// Enum names the values of an enumerated variable (MPI_T_enum): item i has
// the value i and a name unique within the enumeration. A nil *Enum is
// MPI_T_ENUM_NULL, what a variable without an enumeration reports.
//
// Every enumerated control variable has an Enum named after it, its items
// the variable's choices in the order cvar lists them; every state
// performance variable has one too, its items the variable's states in
// pvar's order. An Enum is immutable.
type Enum struct {
	name  string
	items []string
}

// Info returns the enumeration's name and its number of items, at least
// one (MPI_T_ENUM_GET_INFO). It returns ErrInvalidIndex for a nil Enum.
func (e *Enum) Info() (name string, num int, err error) {
	if _, err := current("Enum.Info"); err != nil {
		return "", 0, err
	}
	if e == nil {
		return "", 0, errorf(ErrInvalidIndex, "Enum.Info of MPI_T_ENUM_NULL")
	}
	return e.name, len(e.items), nil
}

// Item returns the value and name of item i (MPI_T_ENUM_GET_ITEM). It
// returns ErrInvalidIndex for a nil Enum and ErrInvalidItem for i outside
// [0, num).
func (e *Enum) Item(i int) (value int, name string, err error) {
	if _, err := current("Enum.Item"); err != nil {
		return 0, "", err
	}
	if e == nil {
		return 0, "", errorf(ErrInvalidIndex, "Enum.Item of MPI_T_ENUM_NULL")
	}
	if i < 0 || i >= len(e.items) {
		return 0, "", errorf(ErrInvalidItem, "item "+strconv.Itoa(i)+" of "+e.name+", which has "+strconv.Itoa(len(e.items)))
	}
	return i, e.items[i], nil
}
