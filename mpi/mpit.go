package mpi

import (
	"github.com/tachyon-hpc/tachyon/asm"
	"github.com/tachyon-hpc/tachyon/pvar"
)

// MPITBind reports that a communicator is a communicator to the MPI tool
// information interface (package mpit's Object, MPI_T_BIND_MPI_COMM):
// variables bound to communicators take one in mpit.Session.HandleAlloc.
// It is safe on a nil communicator.
func (c *Comm) MPITBind() pvar.Bind { return pvar.BindComm }

// MPITKey returns what a tool's read of a variable bound to c is for: the
// calling rank (its endpoint's pvar.Owner, so that in a world of goroutine
// ranks each rank reads its own values, not the process's sum) and c's two
// matching contexts (point-to-point and internal collectives), for the
// variables kept per communicator. It returns false for a nil or freed
// communicator or one whose rank has finalized.
func (c *Comm) MPITKey() (pvar.Key, bool) {
	if c == nil || c.p.ended() || asm.LoadRelaxed32(&c.freed) != 0 {
		return pvar.Key{}, false
	}
	return pvar.Key{Owner: c.p.ep.PvarOwner(), Context: c.ctx, Contexts: 2}, true
}
