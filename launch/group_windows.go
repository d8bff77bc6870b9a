package launch

import (
	"os"
	"syscall"
)

// groupAttr starts a rank in a console process group of its own
// (CREATE_NEW_PROCESS_GROUP), the nearest Windows has to a Unix process
// group: Windows disables Ctrl+C in such a group, so a Ctrl+C at the
// console is the launcher's alone, and it stops the ranks itself.
func groupAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{CreationFlags: syscall.CREATE_NEW_PROCESS_GROUP}
}

// signalGroup terminates p (os.Process.Kill, that is, TerminateProcess)
// whatever sig is: Windows cannot deliver SIGTERM, and has no process
// group to signal, so a rank gets no grace period and the processes it
// started are not stopped with it.
func signalGroup(p *os.Process, sig syscall.Signal) {
	p.Kill()
}
