package mpi

import "unsafe"

// The collective operations: their arguments, the checks, and the
// blocking forms; the package doc's "Collective operations" states the
// rules.

// collKind names a collective.
type collKind uint8

const (
	collBarrier collKind = iota
	collBcast
	collReduce
	collAllreduce
	collGather
	collGatherv
	collScatter
	collScatterv
	collAllgather
	collAllgatherv
	collAlltoall
	collAlltoallv
	collReduceScatter
	collReduceScatterBlock
	collScan
	collExscan
	collKinds
)

var collNames = [collKinds]string{"Barrier", "Bcast", "Reduce", "Allreduce", "Gather", "Gatherv",
	"Scatter", "Scatterv", "Allgather", "Allgatherv", "Alltoall", "Alltoallv",
	"ReduceScatter", "ReduceScatterBlock", "Scan", "Exscan"}

// collOps are the interceptors' operations of the collectives: blocking,
// nonblocking.
var collOps = [collKinds][2]Op{
	{OpBarrier, OpIbarrier}, {OpBcast, OpIbcast}, {OpReduce, OpIreduce}, {OpAllreduce, OpIallreduce},
	{OpGather, OpIgather}, {OpGatherv, OpIgatherv}, {OpScatter, OpIscatter}, {OpScatterv, OpIscatterv},
	{OpAllgather, OpIallgather}, {OpAllgatherv, OpIallgatherv}, {OpAlltoall, OpIalltoall}, {OpAlltoallv, OpIalltoallv},
	{OpReduceScatter, OpIreduceScatter}, {OpReduceScatterBlock, OpIreduceScatterBlock},
	{OpScan, OpIscan}, {OpExscan, OpIexscan},
}

// collArgs is one collective call's arguments, in bytes.
type collArgs struct {
	kind    collKind
	send    []byte
	recv    []byte
	inPlace bool // send was nil
	recvNil bool // recv was nil (Scatter's in place)
	root    int
	op      ReduceOp
	dt      dtype
	esize   int    // bytes of an element
	unit    int    // bytes of the smallest piece a vector may be cut in: an element, a MaxLoc pair
	count   int    // bytes of a block (Gather, Scatter, Allgather, Alltoall, ReduceScatterBlock) or of the vector (Reduce)
	k       kernel // the operation's kernel on dt, once checked

	counts, displs         []int // the v-forms' receive (Scatterv: send) counts and displacements, in elements
	sendCounts, sendDispls []int // Alltoallv's send side
}

// typed returns the arguments of collective kind on buffers of T.
func typed[T Numeric](kind collKind, send, recv []T) collArgs {
	var zero T
	es := int(unsafe.Sizeof(zero))
	return collArgs{kind: kind, send: AsBytes(send), recv: AsBytes(recv), inPlace: send == nil,
		recvNil: recv == nil, dt: dtypeOf[T](), esize: es, unit: es, root: -1}
}

// check validates a's arguments on c (of rank c.rank) and fills in the
// derived fields, before anything is sent.
func (a *collArgs) check(c *Comm, name string) error {
	n, r := c.size, c.rank
	if a.kind == collScatter || a.kind == collScatterv {
		// Scatter's in-place side is its root's receive buffer.
		a.inPlace = a.recvNil && r == a.root
	}
	switch a.kind {
	case collBcast, collReduce, collGather, collGatherv, collScatter, collScatterv:
		if a.root < 0 || a.root >= n {
			return errorf(ErrRoot, name, "root %d is not a rank of a communicator of %d", a.root, n)
		}
	}
	switch a.kind {
	case collReduce, collAllreduce, collReduceScatter, collReduceScatterBlock, collScan, collExscan:
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
		if r != a.root {
			a.inPlace = false
			a.count = len(a.send)
		} else if a.inPlace {
			a.count = len(a.recv)
		} else {
			a.count = len(a.send)
			if len(a.recv) != len(a.send) {
				return countErr(name, "recv holds %d elements for send's %d", len(a.recv)/a.esize, len(a.send)/a.esize)
			}
		}
		return a.wholeUnits(name, a.count)
	case collAllreduce, collScan, collExscan:
		if !a.inPlace && len(a.recv) != len(a.send) {
			return countErr(name, "recv holds %d elements for send's %d", len(a.recv)/a.esize, len(a.send)/a.esize)
		}
		return a.wholeUnits(name, len(a.recv))
	case collGather, collAllgather:
		if a.kind == collGather && r != a.root {
			a.inPlace, a.count = false, len(a.send)
			return nil
		}
		return a.blocks(name, a.recv, a.send, n)
	case collScatter:
		if r != a.root {
			a.inPlace, a.count = false, len(a.recv)
			return nil
		}
		return a.blocks(name, a.send, a.recv, n)
	case collAlltoall:
		if a.inPlace {
			if len(a.recv)%(n*a.esize) != 0 {
				return countErr(name, "recv's %d elements are not %d equal blocks", len(a.recv)/a.esize, n)
			}
			a.count = len(a.recv) / n
			return nil
		}
		if len(a.send) != len(a.recv) || len(a.send)%(n*a.esize) != 0 {
			return countErr(name, "send's %d and recv's %d elements are not both %d equal blocks", len(a.send)/a.esize, len(a.recv)/a.esize, n)
		}
		a.count = len(a.send) / n
	case collReduceScatterBlock:
		if a.inPlace {
			if len(a.recv)%(n*a.esize) != 0 {
				return countErr(name, "recv's %d elements are not %d equal blocks", len(a.recv)/a.esize, n)
			}
			a.count = len(a.recv) / n
		} else {
			if len(a.send) != n*len(a.recv) {
				return countErr(name, "send holds %d elements, not %d blocks of recv's %d", len(a.send)/a.esize, n, len(a.recv)/a.esize)
			}
			a.count = len(a.recv)
		}
		return a.wholeUnits(name, a.count)
	case collGatherv, collAllgatherv:
		if a.kind == collGatherv && r != a.root {
			a.inPlace = false
			return nil
		}
		if err := a.vcheck(name, "counts", a.counts, a.displs, len(a.recv)); err != nil {
			return err
		}
		if !a.inPlace && len(a.send) != a.counts[r]*a.esize {
			return countErr(name, "send holds %d elements where counts[%d] is %d", len(a.send)/a.esize, r, a.counts[r])
		}
	case collScatterv:
		if r != a.root {
			a.inPlace = false
			return nil
		}
		if err := a.vcheck(name, "counts", a.counts, a.displs, len(a.send)); err != nil {
			return err
		}
		if !a.inPlace && len(a.recv) != a.counts[r]*a.esize {
			return countErr(name, "recv holds %d elements where counts[%d] is %d", len(a.recv)/a.esize, r, a.counts[r])
		}
	case collAlltoallv:
		if err := a.vcheck(name, "recvCounts", a.counts, a.displs, len(a.recv)); err != nil {
			return err
		}
		if a.inPlace {
			a.sendCounts, a.sendDispls = a.counts, a.displs
			return nil
		}
		return a.vcheck(name, "sendCounts", a.sendCounts, a.sendDispls, len(a.send))
	case collReduceScatter:
		if len(a.counts) != n {
			return countErr(name, "%d counts for %d ranks", len(a.counts), n)
		}
		total, err := a.countsTotal(name)
		if err != nil {
			return err
		}
		switch {
		case a.inPlace && len(a.recv) < total*a.esize:
			return countErr(name, "recv holds %d elements, fewer than the counts' %d", len(a.recv)/a.esize, total)
		case !a.inPlace && len(a.send) != total*a.esize:
			return countErr(name, "send holds %d elements where the counts add up to %d", len(a.send)/a.esize, total)
		case !a.inPlace && len(a.recv) != a.counts[r]*a.esize:
			return countErr(name, "recv holds %d elements where counts[%d] is %d", len(a.recv)/a.esize, r, a.counts[r])
		}
	}
	return nil
}

// blocks checks a buffer all of whose n blocks are one's own block's size
// (Gather's recv, Scatter's send, Allgather's recv) and sets a.count.
func (a *collArgs) blocks(name string, all, one []byte, n int) error {
	if a.inPlace {
		if len(all)%(n*a.esize) != 0 {
			return countErr(name, "%d elements are not %d equal blocks", len(all)/a.esize, n)
		}
		a.count = len(all) / n
		return nil
	}
	if len(all) != n*len(one) {
		return countErr(name, "a buffer of %d elements for %d blocks of %d", len(all)/a.esize, n, len(one)/a.esize)
	}
	a.count = len(one)
	return nil
}

// wholeUnits checks that a vector of nb bytes is whole MaxLoc pairs.
func (a *collArgs) wholeUnits(name string, nb int) error {
	if nb%a.unit != 0 {
		return countErr(name, "%d elements are not whole (value, index) pairs for %v", nb/a.esize, a.op)
	}
	return nil
}

// vcheck checks a v-form's counts and displacements (nil: packed) over
// a buffer of size bytes.
func (a *collArgs) vcheck(name, what string, counts, displs []int, size int) error {
	n := len(counts)
	if displs != nil && len(displs) != n {
		return countErr(name, "%d displacements for %d %s", len(displs), n, what)
	}
	at := 0
	for i, k := range counts {
		d := at
		if displs != nil {
			d = displs[i]
		}
		if k < 0 || d < 0 {
			return countErr(name, "%s[%d] is %d at displacement %d", what, i, k, d)
		}
		if (d+k)*a.esize > size {
			return errorf(ErrBuffer, name, "block %d (%d elements at %d) lies outside a buffer of %d", i, k, d, size/a.esize)
		}
		at += k
	}
	return nil
}

func countErr(name, format string, args ...any) error {
	return errorf(ErrCount, name, format, args...)
}

// collective runs a's collective on c, blocking, through the
// interceptors if any.
func (c *Comm) collective(a *collArgs) error {
	if intercepted() {
		call := newCall(collOps[a.kind][0], c)
		call.setColl(a)
		return call.run()
	}
	return c.pCollective(a)
}

// pCollective is collective without interception: the schedule is built
// in the one c keeps, run, and kept for the next call. A call with the
// same arguments as the last, on buffers small enough (maxKeptBytes),
// runs the schedule kept without checking or building it again: a loop
// of small collectives pays for the exchange alone.
func (c *Comm) pCollective(a *collArgs) error {
	if (a.kind <= collAllreduce || a.kind == collAllgather || a.kind == collAlltoall) && c.shmState != shmOff {
		if done, err := c.shmCollective(a); done {
			return c.fail(err)
		}
	}
	return c.msgCollective(a)
}

// msgCollective is pCollective by messages.
func (c *Comm) msgCollective(a *collArgs) error {
	name := collNames[a.kind]
	s := c.takeSched()
	if s.key.same(a, c) {
		if err := c.collLive(name); err != nil {
			c.putSched(s)
			return err
		}
	} else {
		if err := c.collReady(name, a); err != nil {
			c.putSched(s)
			return err
		}
		s.reset(c, name)
		build(s, a)
		s.key = keyOf(a, c)
	}
	err := s.run()
	if !s.key.valid {
		s.release()
	}
	c.putSched(s)
	return c.fail(err)
}

// takeSched takes the schedule c keeps for its blocking collectives (a
// new one if another goroutine has it: MPI forbids two collectives on a
// communicator at once, but a program may break the rule). Below
// ThreadMultiple one goroutine at a time calls MPI: a plain load and
// store, no atomic exchange.
func (c *Comm) takeSched() *sched {
	var s *sched
	if c.p.thread < ThreadMultiple {
		s, c.collPlain = c.collPlain, nil
	} else {
		s = c.collCache.Swap(nil)
	}
	if s == nil {
		s = new(sched)
	}
	return s
}

// putSched gives s back to c.
func (c *Comm) putSched(s *sched) {
	if c.p.thread < ThreadMultiple {
		c.collPlain = s
		return
	}
	c.collCache.Store(s)
}

// collLive is collReady's checks of c, for a call whose arguments were
// checked before.
func (c *Comm) collLive(name string) error {
	if err := c.check(name); err != nil {
		return err
	}
	if err := c.collectiveLive(name); err != nil {
		return c.fail(err)
	}
	return nil
}

// schedKey is what a kept schedule was built for: a call with the same
// reuses it. Only calls on at most maxKeptBytes have one (valid), so that
// a communicator keeps no large buffer of the user's alive.
type schedKey struct {
	valid            bool
	c                *Comm
	kind             collKind
	inPlace, recvNil bool
	root             int
	op               ReduceOp
	dt               dtype
	send, recv       *byte
	nsend, nrecv     int
}

// maxKeptBytes bounds the buffers of a schedule kept for reuse.
const maxKeptBytes = 64 << 10

// keyOf returns the key of a's call on c; not valid for a v-form or
// buffers over maxKeptBytes.
func keyOf(a *collArgs, c *Comm) schedKey {
	if a.counts != nil || a.sendCounts != nil || len(a.send)+len(a.recv) > maxKeptBytes {
		return schedKey{}
	}
	return schedKey{valid: true, c: c, kind: a.kind, inPlace: a.inPlace, recvNil: a.recvNil, root: a.root,
		op: a.op, dt: a.dt, send: unsafe.SliceData(a.send), recv: unsafe.SliceData(a.recv), nsend: len(a.send), nrecv: len(a.recv)}
}

// same reports whether k was made for a call on c with a's arguments.
func (k *schedKey) same(a *collArgs, c *Comm) bool {
	return k.valid && k.c == c && k.kind == a.kind && k.inPlace == a.inPlace && k.recvNil == a.recvNil &&
		k.root == a.root && k.op == a.op && k.dt == a.dt && a.counts == nil && a.sendCounts == nil &&
		k.send == unsafe.SliceData(a.send) && k.recv == unsafe.SliceData(a.recv) &&
		k.nsend == len(a.send) && k.nrecv == len(a.recv)
}

// runBarrier runs a barrier's schedule on c: hierarchical where c's
// layout asks for it (collhier.go) and hier is set, else flat.
func (c *Comm) runBarrier(name string, hier bool) error {
	s := c.takeSched()
	s.reset(c, name)
	var h *collHier
	if hier && collHierOn.Get() {
		h = c.hier()
	}
	if h != nil {
		hierBarrier(s, h)
	} else {
		buildBarrier(s)
	}
	err := s.run()
	s.release()
	c.putSched(s)
	return err
}

// collReady checks c and a before collective a starts.
func (c *Comm) collReady(name string, a *collArgs) error {
	if err := c.check(name); err != nil {
		return err
	}
	if c.coll != c {
		return c.interReady(name, a) // intercoll.go
	}
	if err := c.collectiveLive(name); err != nil {
		return c.fail(err)
	}
	if err := a.check(c, name); err != nil {
		return c.fail(err)
	}
	return nil
}

// InPlace returns the send buffer that asks a collective to work in place
// (MPI_IN_PLACE): nil. Allreduce(c, InPlace[float64](), buf, Sum) is
// Allreduce(c, nil, buf, Sum); the package doc says where MPI allows it.
func InPlace[T Numeric]() []T { return nil }

// Bcast sends root's buf to every rank of c, into its buf (MPI_BCAST).
// Every rank's buf has the same length.
func Bcast[T Numeric](c *Comm, buf []T, root int) error {
	a := typed(collBcast, buf, buf)
	a.root = root
	return c.collective(&a)
}

// Reduce combines the ranks' send vectors element by element with op,
// into root's recv (MPI_REDUCE): recv[i] = send_0[i] op send_1[i] op ...
// op send_n-1[i], in rank order. recv matters at root alone, where it
// has send's length; root's nil send takes its vector from recv (in
// place).
func Reduce[T Numeric](c *Comm, send, recv []T, op ReduceOp, root int) error {
	a := typed(collReduce, send, recv)
	a.op, a.root = op, root
	return c.collective(&a)
}

// Allreduce is Reduce whose result every rank gets in recv
// (MPI_ALLREDUCE). A nil send reduces recv in place.
func Allreduce[T Numeric](c *Comm, send, recv []T, op ReduceOp) error {
	if done, err := allreduceSmall(c, send, recv, op); done {
		return err
	}
	a := typed(collAllreduce, send, recv)
	a.op = op
	return c.collective(&a)
}

// Gather gives root every rank's send, in rank order: recv holds Size()
// blocks of len(send), rank i's at block i (MPI_GATHER). recv matters at
// root alone; root's nil send finds its block in recv already.
func Gather[T Numeric](c *Comm, send, recv []T, root int) error {
	a := typed(collGather, send, recv)
	a.root = root
	return c.collective(&a)
}

// Gatherv is Gather with blocks of different sizes (MPI_GATHERV): rank
// i's send, of counts[i] elements, lands at recv[displs[i]:]. counts and
// displs matter at root alone; nil displs packs the blocks in rank order.
func Gatherv[T Numeric](c *Comm, send, recv []T, counts, displs []int, root int) error {
	a := typed(collGatherv, send, recv)
	a.root, a.counts, a.displs = root, counts, displs
	return c.collective(&a)
}

// Scatter sends block i of root's send to rank i, into its recv
// (MPI_SCATTER): send holds Size() blocks of len(recv) and matters at root
// alone. Root's nil recv keeps its block in send (in place).
func Scatter[T Numeric](c *Comm, send, recv []T, root int) error {
	a := typed(collScatter, send, recv)
	a.root = root
	return c.collective(&a)
}

// Scatterv is Scatter with blocks of different sizes (MPI_SCATTERV):
// rank i receives counts[i] elements from send[displs[i]:]. send, counts
// and displs matter at root alone; nil displs packs the blocks.
func Scatterv[T Numeric](c *Comm, send []T, counts, displs []int, recv []T, root int) error {
	a := typed(collScatterv, send, recv)
	a.root, a.counts, a.displs = root, counts, displs
	return c.collective(&a)
}

// Allgather gives every rank every rank's send, in rank order
// (MPI_ALLGATHER): recv holds Size() blocks of len(send). A nil send
// finds each rank's block in its recv already.
func Allgather[T Numeric](c *Comm, send, recv []T) error {
	a := typed(collAllgather, send, recv)
	return c.collective(&a)
}

// Allgatherv is Allgather with blocks of different sizes
// (MPI_ALLGATHERV): rank i's counts[i] elements land at recv[displs[i]:]
// on every rank. nil displs packs the blocks.
func Allgatherv[T Numeric](c *Comm, send, recv []T, counts, displs []int) error {
	a := typed(collAllgatherv, send, recv)
	a.counts, a.displs = counts, displs
	return c.collective(&a)
}

// Alltoall sends block i of send to rank i, which receives it as block
// j of its recv, j the sender's rank (MPI_ALLTOALL): send and recv hold
// Size() blocks of the same size. A nil send takes the blocks from recv.
func Alltoall[T Numeric](c *Comm, send, recv []T) error {
	a := typed(collAlltoall, send, recv)
	return c.collective(&a)
}

// Alltoallv is Alltoall with blocks of different sizes (MPI_ALLTOALLV):
// sendCounts[i] elements from send[sendDispls[i]:] go to rank i, and
// recvCounts[j] elements from rank j land at recv[recvDispls[j]:]. nil
// displacements pack the blocks; a nil send sends from recv, with recv's
// counts.
func Alltoallv[T Numeric](c *Comm, send []T, sendCounts, sendDispls []int, recv []T, recvCounts, recvDispls []int) error {
	a := typed(collAlltoallv, send, recv)
	a.sendCounts, a.sendDispls, a.counts, a.displs = sendCounts, sendDispls, recvCounts, recvDispls
	return c.collective(&a)
}

// ReduceScatterBlock combines the ranks' send vectors with op, as
// Allreduce, and gives rank i block i of the result in recv
// (MPI_REDUCE_SCATTER_BLOCK): send holds Size() blocks of len(recv). A
// nil send takes the vector from recv, which then holds all the blocks
// and gets the result in its first.
func ReduceScatterBlock[T Numeric](c *Comm, send, recv []T, op ReduceOp) error {
	a := typed(collReduceScatterBlock, send, recv)
	a.op = op
	return c.collective(&a)
}

// ReduceScatter is ReduceScatterBlock with blocks of different sizes
// (MPI_REDUCE_SCATTER): rank i gets counts[i] elements of the result,
// the blocks packed in rank order in send.
func ReduceScatter[T Numeric](c *Comm, send, recv []T, counts []int, op ReduceOp) error {
	a := typed(collReduceScatter, send, recv)
	a.op, a.counts = op, counts
	return c.collective(&a)
}

// Scan gives rank i the reduction of ranks 0 to i's send vectors
// (MPI_SCAN). A nil send scans recv in place.
func Scan[T Numeric](c *Comm, send, recv []T, op ReduceOp) error {
	a := typed(collScan, send, recv)
	a.op = op
	return c.collective(&a)
}

// Exscan gives rank i > 0 the reduction of ranks 0 to i-1's send vectors
// (MPI_EXSCAN); rank 0's recv is left as it is. A nil send scans recv in
// place.
func Exscan[T Numeric](c *Comm, send, recv []T, op ReduceOp) error {
	a := typed(collExscan, send, recv)
	a.op = op
	return c.collective(&a)
}

// countsTotal checks a reduce-scatter's counts (none negative, each a
// whole number of the layout's units) and returns their sum.
func (a *collArgs) countsTotal(name string) (int, error) {
	total := 0
	for i, k := range a.counts {
		if k < 0 {
			return 0, countErr(name, "counts[%d] is %d", i, k)
		}
		if err := a.wholeUnits(name, k*a.esize); err != nil {
			return 0, err
		}
		total += k
	}
	return total, nil
}
