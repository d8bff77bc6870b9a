//go:build unix

package launch

import (
	"os"
	"syscall"
)

// groupAttr puts a rank in a process group of its own, so that a signal
// to the launcher's terminal group reaches the launcher alone and it stops
// the ranks itself, and so that signalGroup reaches what the rank started.
func groupAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// signalGroup sends sig to the process group of p (each rank leads its
// own), so that processes a rank started go with it; if the group is gone
// it signals p alone.
func signalGroup(p *os.Process, sig syscall.Signal) {
	if err := syscall.Kill(-p.Pid, sig); err != nil {
		p.Signal(sig)
	}
}
