//go:build linux

package hwtests

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/tachyon-hpc/tachyon/engine"
	"github.com/tachyon-hpc/tachyon/internal/testrole"
	"github.com/tachyon-hpc/tachyon/internal/testskip"
)

// TestShmJobNoRoom: a job whose segment does not fit the shared-memory
// file system fails with an error that names the sizes and the knobs,
// and leaves no file behind. It mounts a 1 MiB tmpfs of its own and
// points a child at it (rings_shm_dir is read at start).
func TestShmJobNoRoom(t *testing.T) {
	if os.Geteuid() != 0 {
		testskip.Skip(t, testskip.NotRoot, "needs root to mount a small tmpfs (CI runs as root)")
	}
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=1m"); errors.Is(err, syscall.EPERM) {
		testskip.Skipf(t, testskip.NotRoot, "mounting a tmpfs: %v (no CAP_SYS_ADMIN here)", err)
	} else if err != nil {
		t.Fatalf("mounting a tmpfs: %v", err)
	}

	defer syscall.Unmount(dir, 0)
	cmd := exec.Command(os.Args[0], testrole.NoTests)
	cmd.Env = append(os.Environ(), testrole.Setting("noroom"), "TACHYON_RINGS_SHM_DIR="+dir)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Fatalf("child: %v\n%s", err, out)
	}
	for _, want := range []string{"8 ranks need", "64 rings of", "no space left", "TACHYON_ENGINE_RING_BYTES"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("error %q lacks %q", out, want)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("left behind: %v", ents)
	}
}

// noRoom is TestShmJobNoRoom's child: it tries to make a 16 MiB job and
// exits 3 with the error.
func noRoom() int {
	seg, err := engine.CreateShmJob("tachyon-hwtest-noroom", 8)
	if err == nil {
		seg.Remove()
		seg.Close()
		fmt.Println("the job fitted")
		return 0
	}
	fmt.Println(err)
	return 3
}
