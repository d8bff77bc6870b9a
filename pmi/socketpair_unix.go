//go:build unix && !linux

package pmi

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// socketpairFDs returns the descriptors of a connected pair of Unix
// stream sockets, both close-on-exec. Without SOCK_CLOEXEC (Darwin has
// none) they are marked after creation, under syscall.ForkLock as the net
// package does, so that no program started meanwhile inherits them.
func socketpairFDs() ([2]int, error) {
	syscall.ForkLock.RLock()
	defer syscall.ForkLock.RUnlock()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err != nil {
		return fds, err
	}
	unix.CloseOnExec(fds[0])
	unix.CloseOnExec(fds[1])
	return fds, nil
}
