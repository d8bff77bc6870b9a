package cvar_test

import (
	"errors"
	"fmt"

	"github.com/tachyon-hpc/tachyon/cvar"
)

// A layer registers its tunables once, at package level: a name, a
// default, a help text that says what the variable does, and its bounds
// and unit. TACHYON_EXAMPLE_BATCH overrides the default at start.
var exampleBatch = cvar.NewInt("example_batch", 32,
	"Frames the example handles in one call.",
	cvar.WithCategory("example"), cvar.WithRange(1, 1024), cvar.WithUnit("frames"))

// Reading and setting a control variable; a value out of its range is
// refused and the variable keeps its value.
func Example() {
	fmt.Println(exampleBatch.Name(), exampleBatch.Env(), exampleBatch.Get(), exampleBatch.Unit())
	min, max, _ := exampleBatch.Range()
	fmt.Println("range", min, max)

	if err := cvar.Set("example_batch", "64"); err != nil {
		fmt.Println(err)
	}
	fmt.Println(exampleBatch.Get())
	err := cvar.Set("example_batch", "5000")
	fmt.Println(errors.Is(err, cvar.ErrRange), exampleBatch.Get())
	exampleBatch.Set(exampleBatch.Default())
	// Output:
	// example_batch TACHYON_EXAMPLE_BATCH 32 frames
	// range 1 1024
	// 64
	// true 64
}
