// Package mpi1 is the interface of the 1993 MPI1 proposal, "A Proposal for a
// User-Level, Message-Passing Interface in a Distributed Memory Environment"
// (Dongarra, Hempel, Hey, Walker; "the seed" below), as written: every
// routine of its Appendix A, with the semantics its pages give, as a thin
// layer over the facade (package mpi).
//
// New gives one process's view over a communicator; the routines are
// its methods, named as in Appendix A without the MPI_ prefix, and they
// return the seed's integers: -1 for an error, ERROR then saying which.
//
//	p, err := mpi1.New(mpi.World())
//	...
//	if p.CSEND(mpi1.Blocking, buf, 1, 7, len(buf)) < 0 {
//		log.Print(mpi1.ETEXT(p.ERROR()))
//	}
//
// docs/mpi1.md has the table from each seed routine to its facade
// equivalent. Where the seed is exact this package follows it; where it
// is not, what follows decides, with the reason.
//
// # Processes
//
// The seed's processes are the ranks of the communicator New is given,
// PID i being rank i: the world of an mpi.Run rank, or mpi.World() of a
// process job under tachyonrun. New is collective over it, and its
// messages are apart from the communicator's own. The seed's processes
// are single threaded: a Proc is not safe for concurrent use, and each
// rank has its own.
//
// # Types, modes and contexts
//
// A message's type is its facade tag: 0 to mpi.TagUB; -1, to a receive
// or PROBE, is the wildcard (mpi.AnyTag), as -1 for the source is
// mpi.AnySource. The seed calls a receive's type "the message type, or
// type mask" but defines no mask: only -1 is one here, and any other
// negative type, or one above the bound, is error status 14 (a mask
// would need a scan of the queues the facade matches in, and the seed
// gives it no meaning to follow).
//
// Each communication context is two facade communicators over the
// processes of its group context: one carries the blocking and
// nonblocking messages, the other the synchronized ones. So a
// synchronized send matches only a synchronized receive, and a blocking
// or nonblocking send only a blocking or nonblocking receive, whatever
// wildcards the receive uses (one communicator with a tag bit for the
// mode could not keep a wildcard type from matching both). Messages of
// different contexts never match, and a group context's contexts are its
// own, so group contexts isolate messages too.
//
// A synchronized send is the facade's Ssend, which also keeps the
// message out of the receiver's system buffers (the seed: it "is not
// buffered"), and then a wait for the acknowledgment that the seed's
// synchronized receive sends once the message is in its buffer: Ssend
// alone returns once the receive has matched, earlier than the seed's
// "message receipt has completed". The acknowledgment goes on the
// group's own communicator, which carries nothing else from process to
// process; a process has one synchronized send at a time, so the next
// acknowledgment from its destination is its own. A synchronized send to
// oneself never completes, as under the seed.
//
// The three variants (C, S, G) only say where a message's bytes come
// from and go to: any send variant matches any receive variant of a
// matching mode, the message being its bytes in order.
//
// # Receiving: capacity, truncation, INFOL, INFOS, INFOT
//
// A receive's capacity is CRECV's maxlen, SRECV's lenblk*nblks and
// GRECV's sum of its nblks block lengths (the seed's SRECV and GRECV say
// "truncated to maxlen bytes", a maxlen they do not have; their blocks
// are what they can hold). A longer message is truncated to the
// capacity, the bytes past it left as they were, and the receive (or
// the WAIT or STATS that completes it) returns the whole length, as the
// seed's CRECV does ("This will exceed maxlen bytes if the message was
// truncated"); INFOL says so too. A shorter message fills the blocks in
// order, the last one perhaps in part.
//
// INFOL, INFOS and INFOT describe the last message a blocking or
// synchronized receive stored, a WAIT or STATS completed a receive of, or
// PROBE found; they are -1 before any, and after a PROBE that found
// none. Completing a send, and CANCEL, leave them as they were. INFOS is
// a PID of the current group context (a GCPID when one is pushed).
//
// PROBE never blocks and sees the pending messages only: those sent in
// blocking or nonblocking mode in the current communication context and
// not yet received (the seed: only they are buffered). It returns -1
// with error status 0 when there is none: that is not an error.
//
// The seed does not promise that messages from one process to another
// arrive in the order sent; the facade does (MPI's rule), so programs
// that rely on it run here but not under every implementation of the
// seed.
//
// # Message IDs
//
// A nonblocking send or receive returns a message ID: positive, unique
// within the process (so within the group context, as the seed asks),
// never reused. It stays valid until the WAIT, the STATS that reports
// completion, or the CANCEL that ends its operation; afterwards it is
// error status 3, as is an ID of another group context. STATS returns
// -1 with error status 0 while the operation goes on. CANCEL returns 0
// once the operation is no longer active: a receive nothing matched
// leaves its buffer untouched, a send no receive matched is withdrawn;
// one that had matched completes first (the seed: it "may or may not
// have completed").
//
// # Groups and group contexts
//
// GIDs and CCIDs are positive, unique within the process, never reused,
// and local names: they are the calling process's handles, and the
// seed's routines take only those its caller was given. The predefined
// group is the first: ALL returns it at the root and the pushed group
// after PUSHG, until the matching POPG.
//
// PUSHG is collective over the group, as the seed asks, and makes a
// fresh default communication context (two facade communicators) for the
// group context (the seed: "a unique default communication context is
// established" at each). Within it process numbers are GCPIDs (Table 1);
// ALL is the pushed group; only groups made inside may be named (error
// status 2 for others); group contexts nest, up to mpi1_max_group_depth
// (error status 12). PUSHG(ALL) is allowed: a nested context of the same
// processes. The seed forbids PUSHG with a nonblocking operation active in
// the current communication context, and POPG with one active in the
// context left: both are error status 15 here, checked rather than left
// undefined (POPG would lose the operation). POPG with no context pushed
// is error status 12. POPG discards the communication contexts and the
// groups made inside, whether or not contexts are still pushed (the
// seed: POPG "destroys all the communication contexts of the process
// group context being exited"), and restores the communication context
// in force before PUSHG.
//
// DEFNG is called by the listed processes alone, as the seed asks
// ("synchronously by all the processes listed in plist"): the facade's
// Comm.CreateGroup (MPI_COMM_CREATE_GROUP) makes the communicator among
// them, under a tag each derives alike from the list and from how many
// DEFNGs with that list the group context has seen, so that disjoint
// groups form at the same time and overlapping ones one after the other.
// GCPID i is plist[i] (the list's order, as MPI_GROUP_INCL keeps it). A
// caller not in its list gets error status 1 (5 in a pushed context), as
// the seed's "invalid PID" is the nearest of its codes.
//
// PARTG is collective over the group partitioned, as the seed asks; a
// subgroup numbers its processes in their order in that group (the
// seed's Table 1), and any int is a key. FREEG does not communicate; ALL
// cannot be freed.
//
// # Communication contexts
//
// NEWC does not communicate: it names a context of the current group
// context; its communicators are made at its first PUSHC, which the seed
// has every process of the group context call. A group context has at
// most mpi1_max_contexts contexts, and at most that many pushed at once
// (error status 11). An unknown CCID, or one of another group context,
// is error status 4. POPC at the default context does nothing and
// returns its CCID (the seed: it "has no effect"). INFOC lists the
// default context first, then the others in the order NEWC made them.
//
// # Errors
//
// ERROR is per Proc: the status of the preceding call of p that can
// fail, 0 after a success; the queries that cannot fail (ERROR, INFOL,
// INFOS, INFOT, ALL, MACHINE) leave it alone, so that one may look at
// them before at ERROR. A bad process number is status 1 (invalid PID)
// at the root and 5 (invalid GCPID) in a pushed group context. Status 6
// is a length beyond its buffer or list (a length, a maxlen, blocks
// beyond buf, a msg too short, a negative offset, a maxlis beyond its
// array); 7 a negative stride, or strided blocks that overlap where they
// are scattered (SRECV, SUNPACK); 8 a negative block length; 9 (the
// seed's "data item" being a block here) a bad block count (negative,
// or beyond nlist or ilist), or listed blocks that overlap where they
// are scattered (GRECV, GUNPACK). Status 10, system buffer overflow, is
// never returned: the facade never drops a message (it delivers it or
// fails the operation with an error, status 16). Codes 13 to 16 are this package's, which the seed
// allows ("Additional entries may be added later"): an unknown mode, a
// bad type, nonblocking operations pending, and a facade failure (a dead
// peer, a freed Proc), whose error Cause returns. Bad arguments never
// panic.
//
// # Cost
//
// A blocking CSEND or CRECV is its argument checks and the facade's Send
// or Recv on the current context's communicator; neither allocates
// (TestBlockingAllocs), and BenchmarkPingPong holds them to the facade's
// speed.
package mpi1
