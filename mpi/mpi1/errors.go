package mpi1

import (
	"errors"

	"github.com/tachyon-hpc/tachyon/mpi"
)

// The error status ERROR returns: 0 after a call that succeeded, else the
// code of what went wrong. Codes 1 to 12 are the seed's table (section
// A.5); 13 to 16 are this package's additions, which the seed allows
// ("Additional entries may be added later"), for failures its table has
// no entry for.
const (
	NoError       = 0  // No error
	ErrPID        = 1  // Invalid PID used: a process number outside the root group context
	ErrGID        = 2  // Invalid GID used: unknown, freed, not of this group context, or one the caller is not in
	ErrMSGID      = 3  // Invalid MSGID used: no active nonblocking operation of this group context has it
	ErrCCID       = 4  // Invalid CCID used: no communication context of this group context has it
	ErrGCPID      = 5  // Invalid GCPID used: a process number outside a pushed group context
	ErrBufSize    = 6  // Invalid message buffer size: a length, or a block, beyond its buffer or list
	ErrStride     = 7  // Invalid stride: negative, or overlapping blocks where they are scattered
	ErrBlockSize  = 8  // Invalid block size: a negative block length
	ErrItemSize   = 9  // Invalid data item size: a bad block count, or overlapping scattered blocks
	ErrOverflow   = 10 // System buffer overflow: never returned (the facade never drops a message)
	ErrContexts   = 11 // Too many communication contexts (mpi1_max_contexts)
	ErrGroups     = 12 // Too many group contexts (mpi1_max_group_depth), or POPG with none pushed
	ErrMode       = 13 // Invalid mode: not "blocking", "nonblocking" or "synchronized"
	ErrType       = 14 // Invalid message type: negative (other than -1 to a receive or probe), or above the tag bound
	ErrPending    = 15 // Nonblocking operations pending where the seed forbids them (PUSHG, POPG)
	ErrCommFailed = 16 // The facade failed for another reason (a dead peer, a freed Proc); Cause says why
)

// etext holds ETEXT's strings, indexed by code.
var etext = [...]string{
	NoError:       "No error",
	ErrPID:        "Invalid PID used",
	ErrGID:        "Invalid GID used",
	ErrMSGID:      "Invalid MSGID used",
	ErrCCID:       "Invalid CCID used",
	ErrGCPID:      "Invalid GCPID used",
	ErrBufSize:    "Invalid message buffer size",
	ErrStride:     "Invalid stride in MPI_SPACK/MPI_SUNPACK",
	ErrBlockSize:  "Invalid block size in pack/unpack routine",
	ErrItemSize:   "Invalid data item size in pack/unpack routine",
	ErrOverflow:   "System buffer overflow",
	ErrContexts:   "Too many communication contexts",
	ErrGroups:     "Too many group contexts",
	ErrMode:       "Invalid mode",
	ErrType:       "Invalid message type",
	ErrPending:    "Nonblocking communication pending",
	ErrCommFailed: "Communication failed",
}

// ETEXT returns a short description (at most 80 characters) of the error
// status code (MPI_ETEXT), or "Unknown error status" for a code no entry
// has.
func ETEXT(code int) string {
	if code < 0 || code >= len(etext) {
		return "Unknown error status"
	}
	return etext[code]
}

// ERROR returns the error status of the preceding call to a routine of p
// that can fail (MPI_ERROR): NoError, or one of the codes above. The
// queries that cannot fail (ERROR, INFOL, INFOS, INFOT, ALL, MACHINE)
// leave it as it was.
func (p *Proc) ERROR() int { return p.err }

// Cause returns the facade's error behind the current error status, or
// nil when the status is NoError or came from this package's own checks.
// It is not part of the seed; it says why a call failed with
// ErrCommFailed.
func (p *Proc) Cause() error { return p.cause }

// ok records a call's success and returns n.
func (p *Proc) ok(n int) int {
	p.err, p.cause = NoError, nil
	return n
}

// fail records code as the call's error status and returns -1.
func (p *Proc) fail(code int) int {
	p.err, p.cause = code, nil
	return -1
}

// failed records the status of a facade error err and returns -1.
func (p *Proc) failed(err error) int {
	p.err, p.cause = p.code(err), err
	return -1
}

// code maps a facade error onto an error status: a bad rank is a bad
// process number (PID at the root, GCPID in a pushed group context), a
// bad tag a bad type, a buffer or count error a bad buffer size; the
// rest is ErrCommFailed.
func (p *Proc) code(err error) int {
	switch {
	case errors.Is(err, mpi.ErrRank):
		return p.pidErr()
	case errors.Is(err, mpi.ErrTag):
		return ErrType
	case errors.Is(err, mpi.ErrBuffer), errors.Is(err, mpi.ErrCount):
		return ErrBufSize
	}
	return ErrCommFailed
}

// pidErr is the code of a bad process number in the current group
// context.
func (p *Proc) pidErr() int {
	if len(p.gstack) > 1 {
		return ErrGCPID
	}
	return ErrPID
}
