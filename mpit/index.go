package mpit

import (
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
