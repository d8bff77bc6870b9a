package engine

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

var (
	errCMAOff   = errors.New("cross-memory attach is off")
	errCMASmall = errors.New("message below engine_cma_min: streamed instead")
)

// readProcess copies len(dst) bytes from address addr of process pid
// (process_vm_readv).
func readProcess(pid int, addr uint64, dst []byte) error {
	return crossCopy(unix.ProcessVMReadv, "process_vm_readv from", pid, addr, dst)
}

// writeProcess copies src to address addr of process pid
// (process_vm_writev).
func writeProcess(pid int, addr uint64, src []byte) error {
	return crossCopy(unix.ProcessVMWritev, "process_vm_writev to", pid, addr, src)
}

// crossCopy moves local to or from address addr of process pid with op,
// looping over partial transfers.
func crossCopy(op func(int, []unix.Iovec, []unix.RemoteIovec, uint) (int, error), what string, pid int, addr uint64, local []byte) error {
	if pid <= 0 {
		return fmt.Errorf("peer pid unknown")
	}
	for off := 0; off < len(local); {
		l := []unix.Iovec{{Base: &local[off]}}
		l[0].SetLen(len(local) - off)
		remote := []unix.RemoteIovec{{Base: uintptr(addr) + uintptr(off), Len: len(local) - off}}
		n, err := op(pid, l, remote, 0)
		if err != nil {
			return fmt.Errorf("%s pid %d: %w", what, pid, err)
		}
		if n == 0 {
			return fmt.Errorf("%s pid %d: no progress", what, pid)
		}
		off += n
	}
	return nil
}

// isPermission reports an error that will recur for every read (ptrace
// policy, seccomp, no such syscall), as opposed to one about this peer.
func isPermission(err error) bool {
	return errors.Is(err, unix.EPERM) || errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EACCES)
}
