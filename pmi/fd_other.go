//go:build !unix

package pmi

import (
	"fmt"
	"net"
)

// connFromFD fails: inheriting a socket by its descriptor number is the
// Unix model (on Windows a launcher would pass a handle, and Go's net
// package cannot wrap one as a connection). The error matches ErrInvalid
// and points to PMI_PORT, which works everywhere.
func connFromFD(fdVar string) (net.Conn, error) {
	return nil, fmt.Errorf("%w: %s=%q: inheriting the process manager's socket by descriptor needs a Unix system; have the launcher set %s instead",
		ErrInvalid, EnvFD, fdVar, EnvPort)
}
