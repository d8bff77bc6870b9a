package mpi

import (
	"errors"

	"github.com/tachyon-hpc/tachyon/engine"
)

// TruncatedLength returns the length in bytes of the whole message whose
// receive returned err, an ErrTruncate error (from Recv, RecvLayout,
// Message.Recv, or the Wait or Test of a receive request), and true; for
// any other error, 0 and false. Status.Count says how much was stored;
// MPI cannot say more, but the 1993 MPI1 proposal's receives return the
// whole length of a truncated message (package mpi1 uses this).
func TruncatedLength(err error) (int, bool) {
	var t *engine.TruncateError
	if errors.As(err, &t) {
		return t.Length, true
	}
	return 0, false
}
