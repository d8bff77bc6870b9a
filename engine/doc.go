// Package engine is the message engine below the mpi facade: the device
// layer of MPICH's ADI. It owns endpoints (one per rank), matching of
// messages against receives by context, source and tag, the eager and
// rendezvous protocols, requests, and the transports that move packets
// between ranks: a rank to itself, ranks as goroutines of one process, and
// ranks as processes on one host over shared-memory rings.
//
// The engine never sees an invalid argument: the facade validates ranks,
// tags, buffers and communicators and maps the engine's errors to MPI error
// classes. Everything the engine does happens in Progress, called by
// waiting goroutines through the progress package's engine, so nothing on
// the message path blocks, allocates in steady state, or makes a system
// call.
//
// A message travels as packets over a Link, which delivers them reliably
// and in order to one peer. Shared memory and in-process links are ring
// buffers; the NIC path will provide the same contract over unreliable
// frames with its own sequence numbers and retransmission, so the protocol
// and matching code here does not change with the medium.
package engine
