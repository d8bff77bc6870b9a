package mpi

import (
	"errors"
	"fmt"
	"os"
	"testing"

	"github.com/tachyon-hpc/tachyon/internal/testskip"
	"github.com/tachyon-hpc/tachyon/metrics/statshm"
)

// TestMainPublishes: started alone, Main publishes the process for
// tachyonstat while its ranks run (as a world of n, rank unknown) and
// removes the file when they return; with metrics_stat off it makes none.
// (Init's publishing is tested against a tachyonrun job by
// cmd/tachyonstat.)
func TestMainPublishes(t *testing.T) {
	if Launched() {
		testskip.Skip(t, testskip.Launched, "this test process was started by a launcher")
	}
	dir := statshm.Dir()
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		testskip.Skipf(t, testskip.NoSharedMemory, "no directory %s (metrics_stat_dir): %v", dir, err)
	}
	mine := func() ([]*statshm.Stat, error) {
		paths, err := statshm.List(dir)
		if err != nil {
			return nil, err
		}
		var out []*statshm.Stat
		for _, p := range paths {
			if st, err := statshm.ReadFile(p); err == nil && st.PID == os.Getpid() && st.Size == 3 {
				out = append(out, st)
			}
		}
		return out, nil
	}
	var during []*statshm.Stat
	err := Main(3, func(w *Comm) error {
		if w.Rank() == 0 {
			var err error
			during, err = mine()
			if err != nil {
				return err
			}
		}
		return w.Barrier()
	})
	if err != nil {
		t.Fatal(err)
	}
	if !statshm.Enabled() {
		if len(during) != 0 {
			t.Fatalf("metrics_stat is off, yet Main published %s", during[0].Path)
		}
		return
	}
	if len(during) != 1 || during[0].Rank != -1 || during[0].Stale || len(during[0].Vars) == 0 {
		t.Fatalf("while Main ran: %v", describe(during))
	}
	if _, err := os.Stat(during[0].Path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("%s after Main returned: %v", during[0].Path, err)
	}
}

func describe(stats []*statshm.Stat) string {
	s := fmt.Sprintf("%d files", len(stats))
	for _, st := range stats {
		s += fmt.Sprintf("; %s rank %d of %d, stale %v, %d variables", st.Path, st.Rank, st.Size, st.Stale, len(st.Vars))
	}
	return s
}
