package affinity

import (
	"errors"
	"github.com/tachyon-hpc/tachyon/internal/testskip"
	"runtime"
	"slices"
	"testing"
)

// TestBindRestores binds the thread to each CPU it may use in turn, checks
// that the mask then holds that CPU alone, and that restoring gives the
// whole mask back.
func TestBindRestores(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	all, err := Threads()
	if errors.Is(err, ErrUnsupported) {
		testskip.Skip(t, testskip.NotLinux, err)
	}
	if err != nil || len(all) == 0 {
		t.Fatalf("Threads: %v %v", all, err)
	}
	for _, c := range all {
		restore, err := Bind(c)
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := Threads(); !slices.Equal(got, []int{c}) {
			t.Errorf("bound to %d, the mask holds %v", c, got)
		}
		restore()
		if got, _ := Threads(); !slices.Equal(got, all) {
			t.Fatalf("restored mask %v, want %v", got, all)
		}
	}
}
