package testrole

import (
	"fmt"
	"strings"
	"sync"
	"testing"
)

// TestOutput: a role process's stdout and stderr and goroutines writing
// at once into one Output lose nothing and tear no write.
func TestOutput(t *testing.T) {
	var out Output
	cmd := Command("echo", []string{"TESTROLE_EXTRA=yes"})
	cmd.Stdout, cmd.Stderr = &out, &out
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 100 {
				fmt.Fprintf(&out, "<%d:%d>", g, i)
			}
		}()
	}
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	s := out.String()
	for g := range 4 {
		for i := range 100 {
			if w := fmt.Sprintf("<%d:%d>", g, i); strings.Count(s, w) != 1 {
				t.Fatalf("%q written once, found %d times in %q", w, strings.Count(s, w), s)
			}
		}
	}
	if !strings.Contains(s, "role=echo extra=yes") {
		t.Fatalf("the role's output is missing: %q", s)
	}
}
