package mpi

import (
	"context"
	"sync"
)

// Nonblocking, persistent and Context forms of the collectives. A
// nonblocking collective's request completes when its schedule's last
// round does (collsched.go); it waits and tests with point-to-point and
// timer requests in Wait, Test, Waitall, Waitany, Testsome and the rest,
// and its status is empty. MPI makes cancelling it or freeing it while
// it is active erroneous: Cancel and Free return ErrRequest.

// setColl fills call with collective a's arguments.
func (call *Call) setColl(a *collArgs) {
	call.coll = *a
	call.Bytes = len(a.send)
	switch a.kind {
	case collBcast:
		call.Bytes = len(a.recv)
		call.Peer = a.root
	case collReduce, collGather, collGatherv, collScatter, collScatterv:
		call.Peer = a.root
	}
}

// invokeColl carries out a collective's Call.
func invokeColl(call *Call) (err error) {
	m := call.Comm
	switch op := call.op; {
	case op >= OpBcast && op <= OpExscan:
		return m.pCollective(&call.coll)
	case op == OpIbarrier || op >= OpIbcast && op <= OpIexscan:
		call.Result.Request, err = m.pIcollective(&call.coll)
	case op == OpBcastInit || op == OpAllreduceInit:
		call.Result.Request, err = m.pCollectiveInit(&call.coll)
	default:
		err = errorf(ErrArg, call.Op.String(), "a Call that was not made by the facade")
	}
	return err
}

// icollective starts a's collective on c, through the interceptors if
// any.
func (c *Comm) icollective(a *collArgs) (*Request, error) {
	if intercepted() {
		call := newCall(collOps[a.kind][1], c)
		call.setColl(a)
		return call.runRequest()
	}
	return c.pIcollective(a)
}

// schedPool recycles the schedules of nonblocking and Context
// collectives, with their steps and scratch space, once their requests
// complete, beyond the few each rank keeps (getSched).
var schedPool = sync.Pool{New: func() any { return new(sched) }}

// A rank keeps up to schedSpares finished schedules for its next
// nonblocking and Context collectives (collPoller.spare): schedPool
// alone is emptied by every garbage collection, after which a call would
// make its schedule, steps and scratch space again. A schedule with more
// than spareScratch words of scratch goes to schedPool, so that a rank
// does not hold a large collective's space for good.
const (
	schedSpares  = 4
	spareScratch = 8192
)

// getSched returns a schedule to reset and build: a spare of the rank's
// if there is one.
func (pl *collPoller) getSched() *sched {
	for i := range pl.spare {
		if s := pl.spare[i].Swap(nil); s != nil {
			return s
		}
	}
	return schedPool.Get().(*sched)
}

// putSched takes back a finished, released schedule.
func (pl *collPoller) putSched(s *sched) {
	words := 0
	for _, ch := range s.chunks {
		words += len(ch)
	}
	if words <= spareScratch {
		for i := range pl.spare {
			if pl.spare[i].CompareAndSwap(nil, s) {
				return
			}
		}
	}
	schedPool.Put(s)
}

// pIcollective is icollective without interception: a schedule of its
// own, started.
func (c *Comm) pIcollective(a *collArgs) (*Request, error) {
	name := collOps[a.kind][1].String()
	if a.kind == collBarrier {
		if err := c.check(name); err != nil {
			return nil, err
		}
		if err := c.collectiveLive(name); err != nil {
			return nil, c.fail(err)
		}
		c = c.coll // an intercommunicator's barrier is over both groups
	} else if err := c.collReady(name, a); err != nil {
		return nil, err
	}
	s := c.p.collPoller().getSched()
	s.reset(c, name)
	build(s, a)
	s.start()
	cr := &collRequest{x: requestExtra{coll: s}}
	cr.r = Request{c: c, op: opColl, x: &cr.x}
	return &cr.r, nil
}

// collRequest is a nonblocking collective's request and its extra part
// in one allocation, the only one a call makes once warm (the schedule
// comes from schedPool): the caller keeps the request after it
// completes, so it cannot be recycled.
type collRequest struct {
	r Request
	x requestExtra
}

// collectiveInit makes a persistent request of a's collective.
func (c *Comm) collectiveInit(op Op, a *collArgs) (*Request, error) {
	if intercepted() {
		call := newCall(op, c)
		call.setColl(a)
		return call.runRequest()
	}
	return c.pCollectiveInit(a)
}

// pCollectiveInit is collectiveInit without interception: the schedule is
// built once, and each Start runs it again.
func (c *Comm) pCollectiveInit(a *collArgs) (*Request, error) {
	name := collNames[a.kind] + "Init"
	if err := c.collReady(name, a); err != nil {
		return nil, err
	}
	s := &sched{persist: true}
	s.reset(c, name)
	build(s, a)
	s.done.MarkDone()
	return &Request{c: c, op: opColl, inactive: true, x: &requestExtra{coll: s, persist: &persistent{coll: s}}}, nil
}

// startColl starts a persistent collective's request (Start).
func (r *Request) startColl() {
	r.x.coll.start()
	r.inactive = false
	r.x.persist.active = true
}

// finishColl collects a complete collective's error; a nonblocking one's
// schedule lets its buffers go.
func (r *Request) finishColl() error {
	s := r.x.coll
	err := s.err
	if !s.persist {
		s.release()
		r.x.coll = nil
		r.c.p.collPoller().putSched(s)
	}
	if err != nil {
		return r.c.fail(err)
	}
	return nil
}

// collectiveContext runs a's collective on c bounded by ctx, through the
// interceptors if any.
func (c *Comm) collectiveContext(ctx context.Context, a *collArgs) error {
	if intercepted() {
		call := newCall(collOps[a.kind][0], c)
		call.setColl(a)
		call.Ctx = ctx
		return call.run()
	}
	return c.pCollectiveContext(ctx, a)
}

// pCollectiveContext is collectiveContext without interception. The
// collective runs as its nonblocking form, waited for until ctx ends; a
// context that ends before it starts ends it before anything is sent,
// one that ends half way abandons it, with c's later collectives (as
// BarrierContext).
func (c *Comm) pCollectiveContext(ctx context.Context, a *collArgs) error {
	name := collNames[a.kind] + "Context"
	if ctx == nil {
		return c.fail(nilContext(name))
	}
	if ctx.Done() == nil {
		return c.pCollective(a)
	}
	if err := c.collReady(name, a); err != nil {
		return err
	}
	if ended(ctx.Done()) {
		return c.fail(contextErr(name, c, ctx, ctx.Err()))
	}
	pl := c.p.collPoller()
	s := pl.getSched()
	s.reset(c, name)
	build(s, a)
	s.start()
	if err := c.p.ep.Progress().WaitContext(ctx, &s.done); err != nil {
		if pl.drop(s) {
			s.release()
			pl.putSched(s)
			return c.fail(c.abandon(name, ctx, err))
		}
		// It finished meanwhile.
	}
	err := s.err
	s.release()
	pl.putSched(s)
	return c.fail(err)
}

// drop takes s, unfinished, out of the poller and cancels its receives
// in flight; it reports false if s finished first.
func (pl *collPoller) drop(s *sched) bool {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	for !s.busy.CompareAndSwap(false, true) {
	}
	defer s.busy.Store(false)
	if s.done.Done() {
		return false
	}
	for i, x := range pl.active {
		if x == s {
			pl.active = append(pl.active[:i], pl.active[i+1:]...)
			pl.n.Add(-1)
			break
		}
	}
	for j, r := range s.reqs {
		if s.sizes[j] >= 0 {
			r.Cancel()
		}
		r.Free()
		s.reqs[j] = nil
	}
	s.reqs, s.sizes = s.reqs[:0], s.sizes[:0]
	return true
}

// Ibarrier starts a barrier (MPI_IBARRIER): its request completes once
// every rank of c has called Ibarrier. As with every collective, the
// ranks call the same one: an Ibarrier on one rank does not meet a
// Barrier on another.
func (c *Comm) Ibarrier() (*Request, error) {
	a := collArgs{kind: collBarrier, root: -1}
	return c.icollective(&a)
}

// Ibcast is the nonblocking Bcast (MPI_IBCAST).
func Ibcast[T Numeric](c *Comm, buf []T, root int) (*Request, error) {
	a := typed(collBcast, buf, buf)
	a.root = root
	return c.icollective(&a)
}

// Ireduce is the nonblocking Reduce (MPI_IREDUCE).
func Ireduce[T Numeric](c *Comm, send, recv []T, op ReduceOp, root int) (*Request, error) {
	a := typed(collReduce, send, recv)
	a.op, a.root = op, root
	return c.icollective(&a)
}

// Iallreduce is the nonblocking Allreduce (MPI_IALLREDUCE).
func Iallreduce[T Numeric](c *Comm, send, recv []T, op ReduceOp) (*Request, error) {
	a := typed(collAllreduce, send, recv)
	a.op = op
	return c.icollective(&a)
}

// Igather is the nonblocking Gather (MPI_IGATHER).
func Igather[T Numeric](c *Comm, send, recv []T, root int) (*Request, error) {
	a := typed(collGather, send, recv)
	a.root = root
	return c.icollective(&a)
}

// Igatherv is the nonblocking Gatherv (MPI_IGATHERV).
func Igatherv[T Numeric](c *Comm, send, recv []T, counts, displs []int, root int) (*Request, error) {
	a := typed(collGatherv, send, recv)
	a.root, a.counts, a.displs = root, counts, displs
	return c.icollective(&a)
}

// Iscatter is the nonblocking Scatter (MPI_ISCATTER).
func Iscatter[T Numeric](c *Comm, send, recv []T, root int) (*Request, error) {
	a := typed(collScatter, send, recv)
	a.root = root
	return c.icollective(&a)
}

// Iscatterv is the nonblocking Scatterv (MPI_ISCATTERV).
func Iscatterv[T Numeric](c *Comm, send []T, counts, displs []int, recv []T, root int) (*Request, error) {
	a := typed(collScatterv, send, recv)
	a.root, a.counts, a.displs = root, counts, displs
	return c.icollective(&a)
}

// Iallgather is the nonblocking Allgather (MPI_IALLGATHER).
func Iallgather[T Numeric](c *Comm, send, recv []T) (*Request, error) {
	a := typed(collAllgather, send, recv)
	return c.icollective(&a)
}

// Iallgatherv is the nonblocking Allgatherv (MPI_IALLGATHERV).
func Iallgatherv[T Numeric](c *Comm, send, recv []T, counts, displs []int) (*Request, error) {
	a := typed(collAllgatherv, send, recv)
	a.counts, a.displs = counts, displs
	return c.icollective(&a)
}

// Ialltoall is the nonblocking Alltoall (MPI_IALLTOALL).
func Ialltoall[T Numeric](c *Comm, send, recv []T) (*Request, error) {
	a := typed(collAlltoall, send, recv)
	return c.icollective(&a)
}

// Ialltoallv is the nonblocking Alltoallv (MPI_IALLTOALLV).
func Ialltoallv[T Numeric](c *Comm, send []T, sendCounts, sendDispls []int, recv []T, recvCounts, recvDispls []int) (*Request, error) {
	a := typed(collAlltoallv, send, recv)
	a.sendCounts, a.sendDispls, a.counts, a.displs = sendCounts, sendDispls, recvCounts, recvDispls
	return c.icollective(&a)
}

// IreduceScatterBlock is the nonblocking ReduceScatterBlock
// (MPI_IREDUCE_SCATTER_BLOCK).
func IreduceScatterBlock[T Numeric](c *Comm, send, recv []T, op ReduceOp) (*Request, error) {
	a := typed(collReduceScatterBlock, send, recv)
	a.op = op
	return c.icollective(&a)
}

// IreduceScatter is the nonblocking ReduceScatter (MPI_IREDUCE_SCATTER).
func IreduceScatter[T Numeric](c *Comm, send, recv []T, counts []int, op ReduceOp) (*Request, error) {
	a := typed(collReduceScatter, send, recv)
	a.op, a.counts = op, counts
	return c.icollective(&a)
}

// Iscan is the nonblocking Scan (MPI_ISCAN).
func Iscan[T Numeric](c *Comm, send, recv []T, op ReduceOp) (*Request, error) {
	a := typed(collScan, send, recv)
	a.op = op
	return c.icollective(&a)
}

// Iexscan is the nonblocking Exscan (MPI_IEXSCAN).
func Iexscan[T Numeric](c *Comm, send, recv []T, op ReduceOp) (*Request, error) {
	a := typed(collExscan, send, recv)
	a.op = op
	return c.icollective(&a)
}

// BcastInit makes a persistent broadcast (MPI_BCAST_INIT): each Start
// broadcasts root's buf as Ibcast would. The schedule is built once.
// BcastInit is collective: every rank makes it, and starts it, in the
// same order as its other collectives on c.
func BcastInit[T Numeric](c *Comm, buf []T, root int) (*Request, error) {
	a := typed(collBcast, buf, buf)
	a.root = root
	return c.collectiveInit(OpBcastInit, &a)
}

// AllreduceInit makes a persistent allreduce (MPI_ALLREDUCE_INIT): each
// Start reduces the current contents of send into recv as Iallreduce
// would, with a schedule built once. Collective, as BcastInit.
func AllreduceInit[T Numeric](c *Comm, send, recv []T, op ReduceOp) (*Request, error) {
	a := typed(collAllreduce, send, recv)
	a.op = op
	return c.collectiveInit(OpAllreduceInit, &a)
}

// BcastContext is Bcast bounded by ctx: an ErrCanceled error if ctx ends
// first. A broadcast so ended is abandoned half way, and with it every
// later collective on c, which return ErrComm (as BarrierContext).
func BcastContext[T Numeric](ctx context.Context, c *Comm, buf []T, root int) error {
	a := typed(collBcast, buf, buf)
	a.root = root
	return c.collectiveContext(ctx, &a)
}

// ReduceContext is Reduce bounded by ctx, as BcastContext.
func ReduceContext[T Numeric](ctx context.Context, c *Comm, send, recv []T, op ReduceOp, root int) error {
	a := typed(collReduce, send, recv)
	a.op, a.root = op, root
	return c.collectiveContext(ctx, &a)
}

// AllreduceContext is Allreduce bounded by ctx, as BcastContext.
func AllreduceContext[T Numeric](ctx context.Context, c *Comm, send, recv []T, op ReduceOp) error {
	a := typed(collAllreduce, send, recv)
	a.op = op
	return c.collectiveContext(ctx, &a)
}

// GatherContext is Gather bounded by ctx, as BcastContext.
func GatherContext[T Numeric](ctx context.Context, c *Comm, send, recv []T, root int) error {
	a := typed(collGather, send, recv)
	a.root = root
	return c.collectiveContext(ctx, &a)
}

// ScatterContext is Scatter bounded by ctx, as BcastContext.
func ScatterContext[T Numeric](ctx context.Context, c *Comm, send, recv []T, root int) error {
	a := typed(collScatter, send, recv)
	a.root = root
	return c.collectiveContext(ctx, &a)
}

// AllgatherContext is Allgather bounded by ctx, as BcastContext.
func AllgatherContext[T Numeric](ctx context.Context, c *Comm, send, recv []T) error {
	a := typed(collAllgather, send, recv)
	return c.collectiveContext(ctx, &a)
}

// AlltoallContext is Alltoall bounded by ctx, as BcastContext.
func AlltoallContext[T Numeric](ctx context.Context, c *Comm, send, recv []T) error {
	a := typed(collAlltoall, send, recv)
	return c.collectiveContext(ctx, &a)
}

// GathervContext is Gatherv bounded by ctx, as BcastContext.
func GathervContext[T Numeric](ctx context.Context, c *Comm, send, recv []T, counts, displs []int, root int) error {
	a := typed(collGatherv, send, recv)
	a.root, a.counts, a.displs = root, counts, displs
	return c.collectiveContext(ctx, &a)
}

// ScattervContext is Scatterv bounded by ctx, as BcastContext.
func ScattervContext[T Numeric](ctx context.Context, c *Comm, send []T, counts, displs []int, recv []T, root int) error {
	a := typed(collScatterv, send, recv)
	a.root, a.counts, a.displs = root, counts, displs
	return c.collectiveContext(ctx, &a)
}

// AllgathervContext is Allgatherv bounded by ctx, as BcastContext.
func AllgathervContext[T Numeric](ctx context.Context, c *Comm, send, recv []T, counts, displs []int) error {
	a := typed(collAllgatherv, send, recv)
	a.counts, a.displs = counts, displs
	return c.collectiveContext(ctx, &a)
}

// AlltoallvContext is Alltoallv bounded by ctx, as BcastContext.
func AlltoallvContext[T Numeric](ctx context.Context, c *Comm, send []T, sendCounts, sendDispls []int, recv []T, recvCounts, recvDispls []int) error {
	a := typed(collAlltoallv, send, recv)
	a.sendCounts, a.sendDispls, a.counts, a.displs = sendCounts, sendDispls, recvCounts, recvDispls
	return c.collectiveContext(ctx, &a)
}

// ReduceScatterBlockContext is ReduceScatterBlock bounded by ctx, as
// BcastContext.
func ReduceScatterBlockContext[T Numeric](ctx context.Context, c *Comm, send, recv []T, op ReduceOp) error {
	a := typed(collReduceScatterBlock, send, recv)
	a.op = op
	return c.collectiveContext(ctx, &a)
}

// ReduceScatterContext is ReduceScatter bounded by ctx, as BcastContext.
func ReduceScatterContext[T Numeric](ctx context.Context, c *Comm, send, recv []T, counts []int, op ReduceOp) error {
	a := typed(collReduceScatter, send, recv)
	a.op, a.counts = op, counts
	return c.collectiveContext(ctx, &a)
}

// ScanContext is Scan bounded by ctx, as BcastContext.
func ScanContext[T Numeric](ctx context.Context, c *Comm, send, recv []T, op ReduceOp) error {
	a := typed(collScan, send, recv)
	a.op = op
	return c.collectiveContext(ctx, &a)
}

// ExscanContext is Exscan bounded by ctx, as BcastContext.
func ExscanContext[T Numeric](ctx context.Context, c *Comm, send, recv []T, op ReduceOp) error {
	a := typed(collExscan, send, recv)
	a.op = op
	return c.collectiveContext(ctx, &a)
}
