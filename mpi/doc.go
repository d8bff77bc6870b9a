// Package mpi is Tachyon's MPI-style facade: environment management,
// communicators and groups, point-to-point communication in every mode,
// requests and timer requests, noncontiguous messages, error classes,
// and the profiling interface (Intercept, Pcontrol) for tools.
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
// # Deadlines and cancellation
//
// Every routine that can block has a Context form beside it that takes a
// context.Context (SendContext, RecvContext, Request.WaitContext,
// WaitanyContext, BarrierContext, ...) and ends when the context does:
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
//   - A collective so ended (BarrierContext) is abandoned half way: the
//     ranks' collectives on its communicator are out of step for good, so
//     every later collective on it fails with ErrComm. Use another
//     communicator (Dup one beforehand).
//   - A context that does not end costs no allocation and no goroutine,
//     and a few instructions a call; context.Background costs a call. A
//     nil context is an ErrArg error.
//   - Interceptors see a Context form as its plain form's operation
//     (OpRecv for RecvContext) with Call.Ctx set.
//
// docs/mpi.md describes the facade in full; docs/getting-started.md starts
// from a first program.
package mpi
