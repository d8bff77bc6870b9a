// Package rings holds Tachyon's lock-free rings over shared memory: what
// carries every message between two ranks of one host, and between the
// goroutine ranks of one process. The engine's shared-memory transport
// puts the rings of a job in a segment; its in-process transport puts
// the same rings in ordinary memory.
//
// The pieces:
//
//   - Segment: a shared-memory file (named under rings_shm_dir, or a
//     memfd passed to the other processes) with a validated header and a
//     table of regions; RemoveStale deletes those whose creator has died.
//   - CellRing: one producer, one consumer, fixed cells carrying small
//     messages inline.
//   - RecordRing: variable-length records with wrap-around padding; one
//     producer (NewRecordRing, what the engine uses between each ordered
//     pair of ranks) or many (NewMPSCRing, a receiver's shared inbox).
//   - dead peers: each side records who is attached, by pid and start
//     time, and a blocked call returns an error once the other side's
//     process has gone instead of waiting for ever.
//
// The contract: a ring has one writer goroutine per producer and one
// reader at a time; records arrive whole, in the order each producer
// wrote them, and a record's bytes are the writer's until it commits
// them, the reader's until it releases them. Nothing on a message path
// allocates, takes a lock or makes a system call: the writer publishes
// with a release store (package asm) of a word the reader polls with an
// acquire load. Memory that comes from another process is never trusted:
// attaching validates every header, and a malformed record is dropped
// and counted, never a panic or a read out of bounds.
//
// The data flow of a record ring, one message from process A to B:
//
//	A: Write(typ, p)                                   B: Poll(fn)
//	   claim room at the tail                             acquire-load the header
//	   copy p after the header ──► segment (shared) ──►   fn(typ, p)
//	   release-store the header    [hdr|p][hdr|p]...      give the room back
//
// Write is Claim, copy and Commit in one call; Hold and Flush batch the
// release stores of a stream of records. docs/rings.md has the layout in
// memory, the memory ordering, the dead-peer rules and the measured
// costs.
package rings
