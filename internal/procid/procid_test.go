package procid

import (
	"os"
	"os/exec"
	"runtime"
	"testing"

	"github.com/tachyon-hpc/tachyon/internal/testskip"
)

// TestAlive: this process is alive under its own start time and not
// under another; a child that exited and was reaped is not.
func TestAlive(t *testing.T) {
	if runtime.GOOS != "linux" {
		testskip.Skip(t, testskip.NotLinux, "process start times come from /proc")
	}
	pid, start, ns := Self()
	if pid != os.Getpid() || start == 0 || ns == 0 {
		t.Fatalf("Self() = %d, %d, %d", pid, start, ns)
	}
	if !Alive(pid, start) || !Alive(pid, 0) {
		t.Error("this process is not alive")
	}
	if Alive(pid, start+1) {
		t.Error("this process is alive under another start time")
	}
	cmd := exec.Command("/bin/true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	if Alive(cmd.Process.Pid, 0) {
		t.Errorf("child %d is alive after it exited", cmd.Process.Pid)
	}
	if Alive(0, 0) || Alive(-1, 0) {
		t.Error("pid 0 or -1 is alive")
	}
}
