package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tachyon-hpc/tachyon/internal/testskip"
)

// TestSpectralTransform runs the seed's Figures 1 and 2 on a 2 x 3 mesh,
// as a job of six processes under tachyonrun and as six goroutines of
// one process, and checks each process's GCPIDs in its row and column
// groups (the seed's Table 1 mapping, by row and by column) and the
// transform's coefficients.
func TestSpectralTransform(t *testing.T) {
	gocmd, err := exec.LookPath("go")
	if err != nil {
		testskip.Skip(t, testskip.NoGoCommand, "no go command to build tachyonrun and the example")
	}
	dir := t.TempDir()
	for pkg, out := range map[string]string{
		"github.com/tachyon-hpc/tachyon/cmd/tachyonrun": "tachyonrun",
		"github.com/tachyon-hpc/tachyon/examples/mpi1":  "mpi1",
	} {
		if b, err := exec.Command(gocmd, "build", "-o", filepath.Join(dir, out), pkg).CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", pkg, err, b)
		}
	}
	want := []string{
		"PID 0: GCPID 0 of the row group, 0 of the column group",
		"PID 1: GCPID 1 of the row group, 0 of the column group",
		"PID 2: GCPID 2 of the row group, 0 of the column group",
		"PID 3: GCPID 0 of the row group, 1 of the column group",
		"PID 4: GCPID 1 of the row group, 1 of the column group",
		"PID 5: GCPID 2 of the row group, 1 of the column group",
		// Rows 1 2 3 and 4 5 6; weights 1 and 2 by latitude.
		"wavenumber 0: spectral coefficient 36.0000",
		"wavenumber 1: spectral coefficient -4.5000",
		"wavenumber 2: spectral coefficient -4.5000",
	}
	prog := filepath.Join(dir, "mpi1")
	for name, cmd := range map[string]*exec.Cmd{
		"processes": exec.Command(filepath.Join(dir, "tachyonrun"), "-n", "6", prog, "-p", "2", "-q", "3"),
		"inproc":    exec.Command(prog, "-p", "2", "-q", "3"),
	} {
		t.Run(name, func(t *testing.T) {
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			lines := strings.Split(strings.TrimSpace(string(out)), "\n")
			if len(lines) != len(want) {
				t.Errorf("%d lines, want %d:\n%s", len(lines), len(want), out)
			}
			for _, w := range want {
				if !strings.Contains(string(out), w+"\n") {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
		})
	}
}
