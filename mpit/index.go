package mpit

import (
	"fmt"
	"sync"

	"github.com/tachyon-hpc/tachyon/cvar"
	"github.com/tachyon-hpc/tachyon/pvar"
)

// The interface's tables: every variable the registries have held, in the
// order the interface first saw them. They only grow (MPI_T forbids
// re-indexing and deletion), so an index, once given, names the same
// variable for the rest of the run, and a variable registered later (a
// package initialized late, a plugin) gets the next free index.
var tables struct {
	sync.Mutex
	cvars      []*cvarEntry
	cvarByName map[string]int
	pvars      []*pvarEntry
	pvarByKey  map[pvarKey]int
	cats       []*category
	catByName  map[string]int
	stamp      int // grows by one with every refresh that adds anything
}

// tableLen returns the length of one of the tables, after taking in what
// the registries gained: CvarNum, PvarNum and CategoryNum.
func tableLen[E any](op string, table *[]E) (int, error) {
	if _, err := current(op); err != nil {
		return 0, err
	}
	tables.Lock()
	defer tables.Unlock()
	refresh()
	return len(*table), nil
}

// entryAt returns entry i of one of the tables, what naming its kind in
// the error, ErrInvalidIndex, of an index outside it. The caller holds
// tables' lock.
func entryAt[E any](op, what string, table *[]E, i int) (E, error) {
	var zero E
	if _, err := current(op); err != nil {
		return zero, err
	}
	if i < 0 || i >= len(*table) {
		refresh()
		if i < 0 || i >= len(*table) {
			return zero, errorf(ErrInvalidIndex, fmt.Sprintf("%s: %s %d of %d", op, what, i, len(*table)))
		}
	}
	return (*table)[i], nil
}

// pvarKey identifies a performance variable: MPI_T allows one name in
// several classes.
type pvarKey struct {
	name  string
	class pvar.Class
}

// refresh appends the variables registered since the last call to the
// tables, files each under its category (adding the categories new to the
// tables) and, if it added anything, advances the stamp. The caller holds
// tables' lock.
func refresh() {
	if tables.cvarByName == nil {
		tables.cvarByName = make(map[string]int)
		tables.pvarByKey = make(map[pvarKey]int)
		tables.catByName = make(map[string]int)
	}
	n := len(tables.cvars) + len(tables.pvars)
	for _, v := range cvar.All() {
		if _, ok := tables.cvarByName[v.Name()]; !ok {
			i := len(tables.cvars)
			tables.cvarByName[v.Name()] = i
			tables.cvars = append(tables.cvars, newCvarEntry(v))
			if c := categoryOf(v.Category()); c != nil {
				c.cvars = append(c.cvars, i)
			}
		}
	}
	for _, v := range pvar.All() {
		k := pvarKey{v.Name(), v.Class()}
		if _, ok := tables.pvarByKey[k]; !ok {
			i := len(tables.pvars)
			tables.pvarByKey[k] = i
			tables.pvars = append(tables.pvars, newPvarEntry(v))
			if c := categoryOf(v.Category()); c != nil {
				c.pvars = append(c.pvars, i)
			}
		}
	}
	if len(tables.cvars)+len(tables.pvars) != n {
		tables.stamp++
	}
}
