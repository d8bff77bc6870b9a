package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/tachyon-hpc/tachyon/internal/testskip"
)

// Example runs the README's first program as four goroutine ranks.
func Example() {
	main()
	// Output:
	// rank 0 of 4 heard from rank 1
	// rank 0 of 4 heard from rank 2
	// rank 0 of 4 heard from rank 3
}

// TestUnderTachyonrun runs the first program as the README says: a job of
// three processes under tachyonrun, and (as root) three hosts of their own
// with -netns, ranks that talk over the network. Rank 0 prints the same
// lines either way.
func TestUnderTachyonrun(t *testing.T) {
	gocmd, err := exec.LookPath("go")
	if err != nil {
		testskip.Skip(t, testskip.NoGoCommand, "no go command to build tachyonrun and hello")
	}
	dir := t.TempDir()
	for pkg, out := range map[string]string{
		"github.com/tachyon-hpc/tachyon/cmd/tachyonrun": "tachyonrun",
		"github.com/tachyon-hpc/tachyon/examples/hello": "hello",
	} {
		if b, err := exec.Command(gocmd, "build", "-o", filepath.Join(dir, out), pkg).CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", pkg, err, b)
		}
	}
	const want = "rank 0 of 3 heard from rank 1\nrank 0 of 3 heard from rank 2\n"
	run := func(t *testing.T, args ...string) {
		cmd := exec.Command(filepath.Join(dir, "tachyonrun"), append(args, filepath.Join(dir, "hello"))...)
		cmd.Stderr = os.Stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("tachyonrun %v: %v\n%s", args, err, out)
		}
		if string(out) != want {
			t.Errorf("tachyonrun %v printed\n%s\nwant\n%s", args, out, want)
		}
	}
	t.Run("processes", func(t *testing.T) { run(t, "-n", "3") })
	t.Run("hosts", func(t *testing.T) {
		if os.Geteuid() != 0 {
			testskip.Skip(t, testskip.NotRoot, "tachyonrun -netns makes network namespaces")
		}
		run(t, "-netns", "-n", "3")
	})
}
