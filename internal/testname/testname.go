// Package testname gives tests names that are new in their process. The
// registries of variables (cvar, pvar) and expvar never forget a name,
// and a second registration of one panics, while go test -count runs a
// test again in the same process: a test registers under Uniq(name), and
// looks the variable up by the name Uniq returned.
package testname

import (
	"strconv"
	"sync"
)

var runs struct {
	sync.Mutex
	n map[string]int
}

// Uniq returns name on its first call with name in this process and
// name_2, name_3, ... on the calls after.
func Uniq(name string) string {
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
