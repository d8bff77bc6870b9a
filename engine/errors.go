package engine

import "errors"

// Errors the engine returns. The facade maps each to an MPI error class;
// functions wrap them with detail, so test with errors.Is.
var (
	// ErrTruncate: the message was longer than the receive buffer. The
	// buffer holds its first part and Status.Count says how much.
	ErrTruncate = errors.New("engine: message truncated")
	// ErrPeerDead: the peer's process died, or its rank ended without
	// sending what a pending operation waited for.
	ErrPeerDead = errors.New("engine: peer process died or exited")
	// ErrClosed: the endpoint was closed (after Finalize).
	ErrClosed = errors.New("engine: endpoint closed")
	// ErrMalformed: a packet from a peer was malformed; it was dropped
	// and counted (engine_malformed_packets).
	ErrMalformed = errors.New("engine: malformed packet from peer")
	// ErrRequest: the request was freed or does not belong to this
	// endpoint.
	ErrRequest = errors.New("engine: invalid request")
	// ErrBuffer: a buffered send found no attached buffer, or not enough
	// free space in it.
	ErrBuffer = errors.New("engine: no room in the attached send buffer")
	// ErrUnsupported: the transport cannot run on this system.
	ErrUnsupported = errors.New("engine: transport not supported here")
	// ErrConfig: a job description or segment does not fit this endpoint.
	ErrConfig = errors.New("engine: invalid job configuration")
	// ErrRank: a rank that is not in the world (nor AnySource where a
	// receive allows it).
	ErrRank = errors.New("engine: invalid rank")
	// ErrTag: a negative tag (other than AnyTag for a receive) or one
	// that does not fit the wire's 32 bits.
	ErrTag = errors.New("engine: invalid tag")
)
