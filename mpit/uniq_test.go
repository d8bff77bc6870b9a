package mpit

import (
	"strconv"
	"sync"
)

// runs counts, by name, the calls of uniq.
var runs struct {
	sync.Mutex
	n map[string]int
}

// uniq returns name on its first call with name in this process and
// name_2, name_3, ... on the calls after. A test registers its variables,
// and names their categories, under uniq(name), since the registries never
// forget a name (a second registration of one panics; a category, once
// there, stays) and go test -count runs the test again in the same process.
// Every lookup of such a name uses the name uniq returned.
func uniq(name string) string {
	runs.Lock()
	defer runs.Unlock()
	if runs.n == nil {
		runs.n = make(map[string]int)
	}
	runs.n[name]++
	if k := runs.n[name]; k > 1 {
		return name + "_" + strconv.Itoa(k)
	}
	return name
}
