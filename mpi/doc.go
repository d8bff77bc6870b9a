// Package mpi is Tachyon's MPI-style facade: environment management,
// communicators and groups, point-to-point communication in every mode,
// requests and timer requests, noncontiguous messages, collective
// operations, error classes, and the profiling interface (Intercept,
// Pcontrol) for tools.
//
// A program is either one rank of a job (Init, then World; started by
// tachyonrun, or alone as a singleton world of one rank), or runs a whole
// world in-process with Run, each rank a goroutine handed its own World.
// Semantics follow the MPI standard; where it calls something erroneous,
// the routine returns an error instead, which errors.Is matches to exactly
// one error class (ErrRank, ErrTag, ErrTruncate, ...).
//
// The facade checks arguments and translates communicator ranks to world
// ranks, then calls the engine package, which does the matching and the
// protocols (and checks ranks and tags again for its other callers).
//
// # Collective operations
//
// The collectives of MPI-4.1 chapter 6 (broadcast, reductions, gathers,
// scatters, all-to-all, scans) run over every rank of an
// intracommunicator, and between the groups of an intercommunicator
// (below). Each is a generic function over the Numeric element types in
// a blocking form (Bcast, Allreduce...), a nonblocking one
// (Ibcast, Iallreduce..., returning a *Request that waits and tests with
// any other) and a Context one (BcastContext...); BcastInit and
// AllreduceInit make persistent requests; Comm.BcastLayout and its kin
// move bytes that a Layout describes. MPI's rules hold:
//
//   - Every rank of the communicator calls the same collectives in the
//     same order, with the same root and operation, and with counts that
//     agree (the ranks' send and receive sizes match as MPI's type
//     signatures must). A receiving rank that gets more than its buffer
//     holds returns ErrTruncate, one that gets less ErrCount.
//   - A root that is not a rank of the communicator is ErrRoot; an
//     operation that does not apply to the element type is ErrOp; a
//     buffer of the wrong length for the call's own arguments is ErrCount
//     (or ErrBuffer for a v-form's block that lies outside its buffer),
//     found before anything is sent.
//   - The predefined operations (Sum, Max, ...) are commutative;
//     non-commutative operations (NewReduceOp) are applied in rank order.
//
// In place (MPI_IN_PLACE) is a nil send buffer (InPlace names it) wherever
// MPI allows it: Allreduce(c, nil, buf, Sum) reduces buf in place;
// Reduce's root, Gather's root and Allgather's ranks find their own
// contribution already in recv (at their block); Scatter's root passes a
// nil recv and keeps its block in send; Alltoall takes the blocks to send
// from recv. A rank that contributes nothing passes an empty, non-nil
// slice, or a nil one where the two mean the same (a count of zero).
//
// A failed rank (ErrProcFailed) or a count that differs does not stop a
// collective at the ranks that see it: they go through the rest of its
// messages, so that the ranks waiting on them are not left hanging, and
// send on an error of their own in place of data, so that every rank
// whose result needs the failed part returns an error too; none returns
// success with wrong data. Ranks whose result does not need it complete
// normally, as MPI's fault-tolerance chapter allows.
//
// Collectives run on a context of their own: they never match
// point-to-point messages, and nonblocking collectives in flight together
// keep their messages apart.
//
// On an intercommunicator the collectives move data between the two
// groups (MPI-4.1 section 6.2.2), in every form. A rooted one (Bcast,
// Reduce, Gather, Scatter and their v-forms) takes Root at the root,
// ProcNull at the other ranks of its group, which take no part, and the
// root's rank in the remote group at the ranks of the other group; the
// root's buffers hold the other group's data (Gather's recv holds
// RemoteSize() blocks). Allreduce gives each group the reduction of the
// other group's vectors; Allgather and Allgatherv the other group's
// blocks; Alltoall sends block i to remote rank i; ReduceScatterBlock and
// ReduceScatter scatter the reduction of one group's vectors over the
// other group, by the receiving group's counts. Scan and Exscan are not
// defined there (ErrComm), nor is in place (ErrBuffer).
//
// # Deadlines and cancellation
//
// Every routine that can block has a Context form beside it that takes a
// context.Context (SendContext, RecvContext, Request.WaitContext,
// WaitanyContext, BarrierContext, AllreduceContext, ...; the collectives'
// Layout forms excepted) and ends when the context does:
//
//   - The context bounds the wait only. An operation that can complete
//     at once (a message already there, a short send with room on its
//     link) completes whatever the context says; and when the context
//     ends as the operation completes, the operation wins.
//   - When the context ends first, the routine returns an *Error of class
//     ErrCanceled whose cause is the context's error: errors.Is matches
//     ErrCanceled and context.Canceled or context.DeadlineExceeded, and
//     ErrorClass returns ErrCanceled. It goes through the communicator's
//     error handler like every other error (MPI's rule: under
//     ErrorsAreFatal a deadline that passes ends the job, as the program
//     asked).
//   - A receive so ended has consumed no message: the next receive gets
//     it. If its message matched before the cancel could take effect, the
//     receive completes and the routine returns the message, with no
//     error.
//   - A send so ended is withdrawn whole or delivered whole, never half:
//     a send its receiver has not matched is withdrawn; one it has
//     matched completes, and the routine returns nil. The receiver
//     withdraws a message it has been told of (a rendezvous, a
//     synchronous send) at its next poll (any call into the library, or
//     its progress goroutine): until then the routine waits.
//   - A request waited for (Request.WaitContext, WaitallContext, ...)
//     stays as it was: active, for the caller to wait for again, test,
//     cancel or free.
//   - A collective so ended (BarrierContext, BcastContext...) is
//     abandoned half way: the ranks' collectives on its communicator are
//     out of step for good, so every later collective on it fails with
//     ErrComm. Use another communicator (Dup one beforehand).
//   - A context that does not end costs no allocation and no goroutine,
//     and a few instructions a call; context.Background costs a call. A
//     nil context is an ErrArg error.
//   - Interceptors see a Context form as its plain form's operation
//     (OpRecv for RecvContext) with Call.Ctx set.
//
// docs/mpi.md describes the facade in full; docs/getting-started.md starts
// from a first program.
package mpi
