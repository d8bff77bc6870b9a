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
// (process_vm_readv), looping over partial reads.
func readProcess(pid int, addr uint64, dst []byte) error {
	if pid <= 0 {
		return fmt.Errorf("peer pid unknown")
	}
	for off := 0; off < len(dst); {
		local := []unix.Iovec{{Base: &dst[off]}}
		local[0].SetLen(len(dst) - off)
		remote := []unix.RemoteIovec{{Base: uintptr(addr) + uintptr(off), Len: len(dst) - off}}
		n, err := unix.ProcessVMReadv(pid, local, remote, 0)
		if err != nil {
			return fmt.Errorf("process_vm_readv from pid %d: %w", pid, err)
		}
		if n == 0 {
			return fmt.Errorf("process_vm_readv from pid %d: no progress", pid)
		}
		off += n
	}
	return nil
}

// writeProcess copies src to address addr of process pid
// (process_vm_writev), looping over partial writes.
func writeProcess(pid int, addr uint64, src []byte) error {
	if pid <= 0 {
		return fmt.Errorf("peer pid unknown")
	}
	for off := 0; off < len(src); {
		local := []unix.Iovec{{Base: &src[off]}}
		local[0].SetLen(len(src) - off)
		remote := []unix.RemoteIovec{{Base: uintptr(addr) + uintptr(off), Len: len(src) - off}}
		n, err := unix.ProcessVMWritev(pid, local, remote, 0)
		if err != nil {
			return fmt.Errorf("process_vm_writev to pid %d: %w", pid, err)
		}
		if n == 0 {
			return fmt.Errorf("process_vm_writev to pid %d: no progress", pid)
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
