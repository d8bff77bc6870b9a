package mpi

// Collectives on intercommunicators (MPI-4.1 section 6.2.2): data flows
// between the two groups, never within one. The same functions serve
// (Bcast, Allreduce, Ibcast, BcastLayout...), with MPI's rules there:
//
//   - Rooted (Bcast, Reduce, Gather, Gatherv, Scatter, Scatterv): the
//     root passes Root, the other ranks of its group ProcNull (they take
//     no part and return at once), and every rank of the other group the
//     root's rank in the root's group. The root's data goes to, or comes
//     from, the other group alone: Gather's recv holds RemoteSize()
//     blocks, Scatter's send as many.
//   - Allreduce gives each group the reduction of the other group's
//     vectors; Allgather(v) gives each group the other group's blocks, in
//     its rank order (recv holds RemoteSize() blocks, counts and
//     displacements are the remote group's); Alltoall(v) sends block i to
//     remote rank i; ReduceScatterBlock and ReduceScatter scatter the
//     reduction of one group's vectors over the other group, in blocks
//     of the receiving group's recv length (or counts, one per rank of
//     the receiving group). The two groups' blocks may differ in size
//     where MPI lets their counts differ (Allgather, Alltoall).
//   - Scan and Exscan are not defined there: ErrComm. In place is not
//     allowed (a nil send where the send buffer matters and recv is not
//     empty): ErrBuffer, as MPICH has it.
//
// Each is a schedule (collsched.go) on the intercommunicator's collective
// context, built from the intracommunicator algorithms run within the
// local group (collalg.go) and messages between the groups' leaders
// (local rank 0), as MPICH does: a reduction goes up a tree to the
// leader, across to the other leader and down a tree again. The schedule
// runs over the union of both groups (Comm.coll), whose count of
// nonblocking collectives gives it its tag, as it does Ibarrier's.

// interReady is collReady's checks of a collective a on intercommunicator
// c, after c's own.
func (c *Comm) interReady(name string, a *collArgs) error {
	if err := c.collectiveLive(name); err != nil {
		return c.fail(err)
	}
	if err := c.coll.collectiveLive(name); err != nil {
		return c.fail(err)
	}
	if err := a.interCheck(c, name); err != nil {
		return c.fail(err)
	}
	return nil
}

// interCheck validates a's arguments on intercommunicator c and fills in
// the derived fields, before anything is sent: a.count is the block
// received (Gather, Allgather at Root and everywhere), sent (Scatter at
// Root) or the vector (Reduce, ReduceScatterBlock's block).
func (a *collArgs) interCheck(c *Comm, name string) error {
	nl, nr, r := c.size, c.psize, c.rank
	sends := true // the caller's send buffer matters
	switch a.kind {
	case collScan, collExscan:
		return errorf(ErrComm, name, "%s is not defined on intercommunicators (MPI-4.1 section 6.11); Merge makes an intracommunicator of both groups", name)
	case collBcast, collReduce, collGather, collGatherv, collScatter, collScatterv:
		if a.root != Root && a.root != ProcNull && (a.root < 0 || a.root >= nr) {
			return errorf(ErrRoot, name, "root %d on an intercommunicator is neither Root, ProcNull nor a rank of the remote group of %d", a.root, nr)
		}
		sends = a.root >= 0 && (a.kind == collReduce || a.kind == collGather || a.kind == collGatherv)
	}
	if sends && a.inPlace && len(a.recv) > 0 {
		return errorf(ErrBuffer, name, "in place (a nil send) is not allowed on an intercommunicator; pass an empty slice to send nothing")
	}
	a.inPlace = false
	switch a.kind {
	case collReduce, collAllreduce, collReduceScatter, collReduceScatterBlock:
		k, err := kernelFor(name, a.op, a.dt)
		if err != nil {
			return err
		}
		a.k = k
		if a.op.kind == opMaxLoc || a.op.kind == opMinLoc {
			a.unit = 2 * a.esize
		}
	}
	switch a.kind {
	case collReduce:
		a.count = len(a.send)
		if a.root == Root {
			a.count = len(a.recv)
		}
		return a.wholeUnits(name, a.count)
	case collAllreduce:
		if len(a.recv) != len(a.send) {
			return countErr(name, "recv holds %d elements for send's %d", len(a.recv)/a.esize, len(a.send)/a.esize)
		}
		return a.wholeUnits(name, len(a.recv))
	case collGather:
		if a.root == Root {
			return a.interEven(name, "recv", a.recv, nr)
		}
	case collScatter:
		if a.root == Root {
			return a.interEven(name, "send", a.send, nr)
		}
	case collAllgather:
		return a.interEven(name, "recv", a.recv, nr)
	case collAlltoall:
		if err := a.interEven(name, "send", a.send, nr); err != nil {
			return err
		}
		return a.interEven(name, "recv", a.recv, nr)
	case collGatherv, collScatterv:
		if a.root != Root {
			return nil
		}
		buf := a.recv
		if a.kind == collScatterv {
			buf = a.send
		}
		return a.interVcheck(name, "counts", a.counts, a.displs, len(buf), nr)
	case collAllgatherv:
		return a.interVcheck(name, "counts", a.counts, a.displs, len(a.recv), nr)
	case collAlltoallv:
		if err := a.interVcheck(name, "sendCounts", a.sendCounts, a.sendDispls, len(a.send), nr); err != nil {
			return err
		}
		return a.interVcheck(name, "recvCounts", a.counts, a.displs, len(a.recv), nr)
	case collReduceScatterBlock:
		if len(a.send) != nl*len(a.recv) {
			return countErr(name, "send holds %d elements, not %d blocks (the local group's size) of recv's %d", len(a.send)/a.esize, nl, len(a.recv)/a.esize)
		}
		a.count = len(a.recv)
		return a.wholeUnits(name, a.count)
	case collReduceScatter:
		if len(a.counts) != nl {
			return countErr(name, "%d counts for a local group of %d", len(a.counts), nl)
		}
		total, err := a.countsTotal(name)
		if err != nil {
			return err
		}
		switch {
		case len(a.send) != total*a.esize:
			return countErr(name, "send holds %d elements where the counts add up to %d", len(a.send)/a.esize, total)
		case len(a.recv) != a.counts[r]*a.esize:
			return countErr(name, "recv holds %d elements where counts[%d] is %d", len(a.recv)/a.esize, r, a.counts[r])
		}
	}
	return nil
}

// interEven checks that buf is n equal blocks of whole elements, one per
// remote rank, and sets a.count to a block's bytes.
func (a *collArgs) interEven(name, what string, buf []byte, n int) error {
	if len(buf)%(n*a.esize) != 0 {
		return countErr(name, "%s's %d elements are not %d equal blocks, one for each rank of the remote group", what, len(buf)/a.esize, n)
	}
	a.count = len(buf) / n
	return nil
}

// interVcheck is vcheck for counts of one block per rank of a group of n.
func (a *collArgs) interVcheck(name, what string, counts, displs []int, size, n int) error {
	if len(counts) != n {
		return countErr(name, "%d %s for a remote group of %d", len(counts), what, n)
	}
	return a.vcheck(name, what, counts, displs, size)
}

// sendWorld adds a send of b to world rank w.
func (s *sched) sendWorld(w int, b []byte) {
	s.steps = append(s.steps, step{kind: stSend, peer: w, a: b})
}

// recvWorld adds a receive into b from world rank w.
func (s *sched) recvWorld(w int, b []byte) {
	s.steps = append(s.steps, step{kind: stRecv, peer: w, b: b})
}

// buildInter fills s, made for intercommunicator s.c, with the schedule
// of a's collective. The algorithms within the local group build on
// c.local, a view of it as an intracommunicator (only its group, rank and
// size matter to them; every step names world ranks); the schedule then
// runs over the union of both groups, on the same context.
func buildInter(s *sched, a *collArgs) {
	c := s.c
	r, nr := c.rank, c.psize
	remote := c.peers.worldRank
	s.c = c.local
	defer func() { s.c = c.coll }()
	switch a.kind {
	case collBcast:
		switch {
		case a.root == Root:
			s.sendWorld(remote(0), a.recv)
			s.wait()
		case a.root >= 0:
			if r == 0 {
				s.recvWorld(remote(a.root), a.recv)
				s.wait()
			}
			buildBcast(s, a.recv, 0)
		}
	case collReduce:
		switch {
		case a.root == Root:
			s.recvWorld(remote(0), a.recv)
			s.wait()
		case a.root >= 0:
			acc := localReduce(s, a, a.send)
			if r == 0 {
				s.sendWorld(remote(a.root), acc)
				s.wait()
			}
		}
	case collAllreduce:
		acc := localReduce(s, a, a.send)
		if r == 0 {
			s.recvWorld(remote(0), a.recv)
			s.sendWorld(remote(0), acc)
			s.wait()
		}
		buildBcast(s, a.recv, 0)
	case collGather, collGatherv:
		switch {
		case a.root == Root:
			off, lens := a.remoteBlocks(s, a.counts, a.displs, a.count, nr)
			for i := range nr {
				s.recvWorld(remote(i), a.recv[off[i]:off[i]+lens[i]])
			}
			s.wait()
		case a.root >= 0:
			s.sendWorld(remote(a.root), a.send)
			s.wait()
		}
	case collScatter, collScatterv:
		switch {
		case a.root == Root:
			off, lens := a.remoteBlocks(s, a.counts, a.displs, a.count, nr)
			for i := range nr {
				s.sendWorld(remote(i), a.send[off[i]:off[i]+lens[i]])
			}
			s.wait()
		case a.root >= 0:
			s.recvWorld(remote(a.root), a.recv)
			s.wait()
		}
	case collAllgather, collAllgatherv:
		interAllgather(s, a, remote, nr)
	case collAlltoall, collAlltoallv:
		soff, slens := a.remoteBlocks(s, a.sendCounts, a.sendDispls, len(a.send)/nr, nr)
		roff, rlens := a.remoteBlocks(s, a.counts, a.displs, len(a.recv)/nr, nr)
		// Pairwise over max(nl, nr) places: in round i local rank r sends
		// to remote rank r+i and receives from remote rank r-i, as that
		// rank, in its own round i, receives from and sends to it.
		m := max(c.size, nr)
		for i := 0; i < m; i++ {
			to, from := (r+i)%m, (r-i+m)%m
			if from < nr {
				s.recvWorld(remote(from), a.recv[roff[from]:roff[from]+rlens[from]])
			}
			if to < nr {
				s.sendWorld(remote(to), a.send[soff[to]:soff[to]+slens[to]])
			}
			if from < nr || to < nr {
				s.wait()
			}
		}
	case collReduceScatter, collReduceScatterBlock:
		acc := localReduce(s, a, a.send)
		var res []byte
		if r == 0 {
			res = s.scratch(len(a.send))
			s.recvWorld(remote(0), res)
			s.sendWorld(remote(0), acc)
			s.wait()
		}
		buildScatter(s, &collArgs{kind: collScatterv, send: res, recv: a.recv, root: 0, counts: a.counts, esize: a.esize, count: a.count})
	}
}

// localReduce adds the reduction of the local group's vectors in, in rank
// order, to the leader (local rank 0), and returns the buffer that holds
// it there (nil elsewhere): in itself in a group of one.
func localReduce(s *sched, a *collArgs, in []byte) []byte {
	if s.c.size == 1 {
		return in
	}
	var acc []byte
	if s.c.rank == 0 {
		acc = s.scratch(len(in))
	}
	buildReduce(s, &collArgs{kind: collReduce, send: in, recv: acc, root: 0, op: a.op, count: len(in), unit: a.unit, esize: a.esize})
	return acc
}

// interAllgather: every rank sends its block to the remote leader, which
// receives the blocks of the other group and broadcasts them over its
// own. Blocks at displacements of the caller's go through a packed
// buffer, broadcast whole and copied out at each rank.
func interAllgather(s *sched, a *collArgs, remote func(int) int, nr int) {
	r := s.c.rank
	off, lens := a.remoteBlocks(s, a.counts, a.displs, a.count, nr)
	total := 0
	for _, l := range lens {
		total += l
	}
	into := a.recv[:total] // the blocks packed, as they are broadcast
	packed := a.displs == nil
	if !packed && s.c.size > 1 {
		into = s.scratch(total)
	}
	if r == 0 {
		at := 0
		for i := range nr {
			if packed || s.c.size == 1 {
				s.recvWorld(remote(i), a.recv[off[i]:off[i]+lens[i]])
			} else {
				s.recvWorld(remote(i), into[at:at+lens[i]])
			}
			at += lens[i]
		}
	}
	s.sendWorld(remote(0), a.send)
	s.wait()
	if s.c.size == 1 {
		return
	}
	buildBcast(s, into, 0)
	if !packed {
		at := 0
		for i := range nr {
			s.copy(a.recv[off[i]:off[i]+lens[i]], into[at:at+lens[i]])
			at += lens[i]
		}
	}
}

// remoteBlocks returns the byte offsets and lengths of n blocks, one per
// remote rank: the v-form's counts and displacements, or blocks of b
// bytes.
func (a *collArgs) remoteBlocks(s *sched, counts, displs []int, b, n int) (off, lens []int) {
	if counts != nil {
		return vblocks(s, counts, displs, a.esize)
	}
	return uniform(s, n, b)
}

// isRoot reports whether the caller is the root of a rooted collective
// on c given root: its rank on an intracommunicator, Root on an
// intercommunicator.
func (c *Comm) isRoot(root int) bool {
	if c.IsInter() {
		return root == Root
	}
	return c.rank == root
}

// isLeaf reports whether the caller sends to or receives from the root
// of a rooted collective on c given root: every rank of an
// intracommunicator, the other group's of an intercommunicator.
func (c *Comm) isLeaf(root int) bool {
	return !c.IsInter() || root >= 0
}
