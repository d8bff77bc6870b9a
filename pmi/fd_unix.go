//go:build unix

package pmi

import (
	"fmt"
	"net"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// connFromFD wraps a duplicate of the socket whose number is in fdVar. The
// launcher's descriptor itself is left open, but marked close-on-exec so
// that programs this process starts do not inherit it.
func connFromFD(fdVar string) (net.Conn, error) {
	fd, err := strconv.Atoi(fdVar)
	if err != nil || fd < 0 {
		return nil, fmt.Errorf("%w: %s=%q is not a descriptor number", ErrInvalid, EnvFD, fdVar)
	}
	// Duplicate before wrapping: an *os.File closes its descriptor when
	// collected, and the launcher's number may not be a socket at all.
	dup, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("pmi: %s=%d: %w", EnvFD, fd, err)
	}
	f := os.NewFile(uintptr(dup), EnvFD)
	conn, err := net.FileConn(f)
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("pmi: %s=%d is not a usable socket: %w", EnvFD, fd, err)
	}
	unix.CloseOnExec(fd)
	return conn, nil
}
