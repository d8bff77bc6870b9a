// Package engine is the message engine below the mpi facade: the device
// layer of MPICH's ADI. It owns endpoints (one per rank), matching of
// messages against receives by context, source and tag, the eager and
// rendezvous protocols, requests, and the transports that move packets
// between ranks: a rank to itself, ranks as goroutines of one process,
// ranks as processes on one host over shared-memory rings, and ranks on
// other hosts over the network (nic's links, netconn.go).
//
// The facade validates communicators, buffers and the arguments MPI gives
// meaning to, and maps the engine's errors to MPI error classes; the
// engine checks ranks and tags again for its other callers, with ErrRank
// and ErrTag. Everything the engine does happens in Progress, called by
// waiting goroutines through the progress package's engine, so nothing on
// the message path blocks or allocates in steady state, and the
// shared-memory path makes no system call (the network's UDP link and
// bulk lane make the socket calls their kernel paths need).
//
// A message travels as packets over a Link, which delivers them reliably
// and in order to one peer. Shared-memory and in-process links are ring
// buffers; a network link gives the same contract over unreliable frames,
// with its own sequence numbers and retransmission, so the protocol and
// matching code here does not change with the medium.
//
// docs/engine.md has the design and the measured costs;
// docs/network.md the network transport.
package engine
