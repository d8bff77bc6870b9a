package rings

import "errors"

// Errors returned by rings and segments. Functions wrap them with detail
// where that costs nothing on the message path; test with errors.Is.
var (
	// ErrFull: a try-send found no free space; retry after the consumer
	// makes progress.
	ErrFull = errors.New("rings: ring full")
	// ErrEmpty: a try-receive found nothing ready.
	ErrEmpty = errors.New("rings: ring empty")
	// ErrTooLarge: the message does not fit in one cell or record.
	ErrTooLarge = errors.New("rings: message too large")
	// ErrShortBuffer: the receive buffer is smaller than the next message,
	// which stays in the ring.
	ErrShortBuffer = errors.New("rings: buffer too short for message")
	// ErrInvalid: a bad argument or an operation out of order (a commit
	// without a claim).
	ErrInvalid = errors.New("rings: invalid argument")
	// ErrClosed: the other side, or the segment, was closed.
	ErrClosed = errors.New("rings: closed")
	// ErrPeerDead: the process on the other side of a ring died.
	ErrPeerDead = errors.New("rings: peer process died")
	// ErrBusy: the side of a ring that was asked for is already attached
	// by a live process (or no producer slot of a many-to-one ring is free).
	ErrBusy = errors.New("rings: ring side already attached")
	// ErrCorrupt: a cell or record written by the peer has a malformed
	// length; it was dropped and counted (rings_malformed_dropped). A
	// many-to-one writer also returns it, without dropping anything, when
	// the ring's shared indices are impossible (the head beyond the tail).
	ErrCorrupt = errors.New("rings: malformed data from peer")
	// ErrBadSegment: a segment or ring header failed validation (wrong
	// magic, version, kind, sizes or layout); nothing was attached.
	ErrBadSegment = errors.New("rings: bad segment or ring header")
	// ErrUnsupported: shared-memory segments need Linux.
	ErrUnsupported = errors.New("rings: shared-memory segments need Linux")
)
