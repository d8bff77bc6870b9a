package cvar

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
// name_2, name_3, ... on the calls after. A test registers its variables
// under uniq(name), and files those whose order it checks under a category
// of uniq's, since the registry never forgets a name (a second registration
// of one panics) and go test -count runs the test again in the same
// process. Every lookup of such a name, and of its environment variable,
// uses the name uniq returned.
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
