package pvar_test

import (
	"fmt"

	"github.com/tachyon-hpc/tachyon/pvar"
)

// A layer registers its counters once, at package level, and bumps them
// on its paths; tools (mpit, tachyonstat, metrics/expvars, metrics/prom)
// find them by name in the registry.
var exampleFrames = pvar.NewCounter("example_frames", "Frames the example sent.", pvar.WithUnit("frames"))

// Counting events and reading the counter back through the registry, as
// a tool does.
func Example() {
	v, _ := pvar.Lookup("example_frames")
	before := v.Read()
	exampleFrames.Add(3)
	exampleFrames.Add(2)
	fmt.Println(v.Name(), v.Class(), v.Unit(), v.Read()-before)
	// Output:
	// example_frames counter frames 5
}
