package testcvar

import (
	"testing"

	"github.com/tachyon-hpc/tachyon/cvar"
	"github.com/tachyon-hpc/tachyon/internal/testname"
)

// TestSet: the value holds during the test and its subtests, and the one
// before comes back after.
func TestSet(t *testing.T) {
	name := testname.Uniq("testcvar_example")
	v := cvar.NewInt(name, 5, "A variable of TestSet.", cvar.WithRange(0, 10))
	v.Set("7") // a value other than the default, as an environment would give
	t.Run("set", func(t *testing.T) {
		Set(t, name, "3")
		if v.Get() != 3 {
			t.Errorf("during the test: %d, want 3", v.Get())
		}
	})
	if v.Get() != 7 {
		t.Errorf("after the test: %d, want 7, the value before", v.Get())
	}
}
