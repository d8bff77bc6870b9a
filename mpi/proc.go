package mpi

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/tachyon-hpc/tachyon/asm"
	"github.com/tachyon-hpc/tachyon/engine"
)

// proc is one rank's MPI state: the process's, after Init, or one
// goroutine rank's under Run.
type proc struct {
	_         [64]byte // reqFree and reqLock are written per request: no line shared with another rank's proc
	ep        *engine.Endpoint
	world     *Comm
	self      *Comm
	closer    func()
	sess      *Session    // the session the rank is part of (Run's worlds have one of their own)
	conn      *conn       // the connection whose world this is (connect.go), nil for a session's world
	mu        sync.Mutex  // communicator creation; never the message path
	nextCtx   uint32      // lowest context pair no communicator of this rank uses
	abandoned []uint32    // collective contexts of communicators whose collectives were abandoned (Comm.abandon), under mu
	done      uint32      // 1 once finalized, closed or disconnected (end, ended): every routine returns endError's error
	thread    ThreadLevel // the thread level provided (QueryThread)
	appNum    int         // MPI_APPNUM: the launch block this rank came from, -1 if unknown
	universe  int         // MPI_UNIVERSE_SIZE
	skew      float64     // the bound on two ranks' Wtime disagreement, Init's measure (WtimeSkew)
	collOnce  sync.Once   // registers collPl
	collPl    *collPoller // advances the rank's nonblocking collectives (collsched.go)
	hosts     []int32     // by world rank, its host's lowest world rank; nil when the job has one host (collhier.go)

	// Requests WaitallInto completed, for Isend and Irecv to reuse: a
	// plain stack while one goroutine at a time calls MPI (thread levels
	// below ThreadMultiple); at ThreadMultiple the same stack behind
	// reqLock, which a goroutine that finds it taken does without (it
	// allocates, or leaves the requests to the collector), so it never
	// waits. One compare-and-swap per request taken and one per batch
	// given back: a sync.Pool took two to four atomic operations per
	// request, each a full fence on amd64. An array, not a slice: giving
	// a request back is one store and a count, with no capacity to check
	// or to grow. A request here keeps of its last operation only its
	// communicator, opcode and inactive flag: the rest is zero, as a new
	// one's, so that Isend sets only those.
	reqFree [maxFreeRequests]*Request
	nFree   int // requests on reqFree

	// Calls for the interceptors (intercept.go) of a rank below
	// ThreadMultiple: a plain stack, as reqFree, cheaper than sync.Pool's
	// pinning (docs/tools.md). At ThreadMultiple Calls
	// come from the pool.
	calls  [maxFreeCalls]*Call
	nCalls int

	reqLock uint32
	_       [64]byte
}

// ended reports whether p is done: a relaxed load, so that the message
// path's checks stay one chain of compares (as a communicator's freed
// flag). Close may set it from another goroutine.
func (p *proc) ended() bool { return asm.LoadRelaxed32(&p.done) != 0 }

// end marks p done; the caller holds p.mu.
func (p *proc) end() { asm.StoreRelaxed32(&p.done, 1) }

// endError is the error of a routine op on a communicator of p once p
// is done: after Finalize, after its session's Close, after its
// connection's Disconnect.
func (p *proc) endError(op string) *Error {
	switch {
	case p.conn != nil:
		return errorf(ErrComm, op, "the connection was disconnected (Disconnect, or its session's Close)")
	case p.sess != nil && !p.sess.def && !p.sess.inRun:
		return errorf(ErrSession, op, "session %s was closed", p.sess.cfg.name)
	}
	return errorf(ErrNotInitialized, op, "MPI was finalized")
}

// release undoes newProc's world when what made it fails: the endpoint
// and what closer holds go, with nothing delivered.
func (p *proc) release() {
	p.unlabel()
	p.ep.Close()
	if p.closer != nil {
		p.closer()
	}
}

// close ends p locally, not collectively: it delivers what p sent while
// ctx lasts (engine.Endpoint.CloseContext), then fails what is pending
// and releases the endpoint. It returns ctx's error if ctx ended with
// sends undelivered.
func (p *proc) close(ctx context.Context) error {
	p.mu.Lock()
	if p.ended() {
		p.mu.Unlock()
		return nil
	}
	p.end()
	p.mu.Unlock()
	err := p.ep.CloseContext(ctx)
	p.unlabel()
	if errors.Is(err, engine.ErrClosed) {
		err = nil
	}
	if p.closer != nil {
		p.closer()
	}
	return err
}

// maxFreeCalls bounds a rank's stack of Calls: one operation, and the
// ones an interceptor makes inside it.
const maxFreeCalls = 4

// newRequest returns a request, recycled if one is at hand, for the
// caller to set whole (*r = Request{...}: a recycled one may hold an
// earlier operation's fields).
func (p *proc) newRequest() *Request {
	if p.thread < ThreadMultiple {
		return p.popFree()
	}
	if !atomic.CompareAndSwapUint32(&p.reqLock, 0, 1) {
		return new(Request)
	}
	r := p.popFree()
	asm.StoreRelease32(&p.reqLock, 0)
	return r
}

// takeFree is newRequest's usual case, small enough to go in line
// without a profile (a window's sends): a request off the free stack
// below ThreadMultiple, or nil, where the caller calls newRequest. The
// level is checked first: at ThreadMultiple the stack is read only under
// reqLock.
func (p *proc) takeFree() *Request {
	if p.thread >= ThreadMultiple {
		return nil
	}
	return p.pop()
}

// requestFor returns a request for engine request er, for the caller to
// set whole, as newRequest's. While one goroutine at a time calls MPI,
// each slot of the engine's request pool keeps the request last made for
// it (engine.Request.Owner): WaitallInto marks that request spare instead
// of giving it back to reqFree, and the slot's next operation takes it
// again, so that a window of operations in a loop moves no request
// through a pool but the engine's. A request is handed out only while
// spare, and that flag is set only once no one holds it, so a slot's
// request never serves two operations at once.
func (p *proc) requestFor(er *engine.Request) *Request {
	if r := spareOf(er); r != nil {
		return r
	}
	if p.thread >= ThreadMultiple {
		return p.newRequest()
	}
	r := p.popFree()
	er.SetOwner(r)
	return r
}

// spareOf returns the spare request er's slot keeps, or nil: requestFor's
// usual case (Irecv has it in line). Only requestFor below ThreadMultiple
// gives a slot a request. A spare request keeps of its last operation
// only its communicator, opcode and inactive flag: the rest is zero, and
// Irecv sets those fields without zeroing it first.
func spareOf(er *engine.Request) *Request {
	if r, _ := er.Owner().(*Request); r != nil && r.spare {
		return r
	}
	return nil
}

// popFree takes a request off the free stack, or makes one. The slot it
// leaves keeps its pointer until the stack grows over it (no store, and
// no write barrier, a request): at most maxFreeRequests requests that
// the program dropped without a Wait stay reachable that way.
func (p *proc) popFree() *Request {
	if r := p.pop(); r != nil {
		return r
	}
	return new(Request)
}

// pop takes a request off the free stack, nil if it is empty: one
// compare says both that it is not and that the index is in range.
func (p *proc) pop() *Request {
	if n := p.nFree - 1; uint(n) < maxFreeRequests {
		p.nFree = n
		return p.reqFree[n]
	}
	return nil
}

// giveBack takes back r, which WaitallInto completed, no one may use any
// more, and no engine request's slot keeps (requestFor), below
// ThreadMultiple: straight onto the stack. (At ThreadMultiple WaitallInto
// gathers its requests in a recycler, for one compare-and-swap a batch.)
func (p *proc) giveBack(r *Request) {
	if n := p.nFree; n < maxFreeRequests {
		p.reqFree[n] = r
		p.nFree = n + 1
	}
}

// recycle takes back requests no one may use any more (rs is left
// holding them).
func (p *proc) recycle(rs []*Request) {
	for _, r := range rs {
		*r = Request{}
	}
	if p.thread < ThreadMultiple {
		p.pushFree(rs)
		return
	}
	if atomic.CompareAndSwapUint32(&p.reqLock, 0, 1) {
		p.pushFree(rs)
		asm.StoreRelease32(&p.reqLock, 0)
	}
}

func (p *proc) pushFree(rs []*Request) {
	p.nFree += copy(p.reqFree[p.nFree:], rs)
}

// maxFreeRequests bounds the recycled requests a serial rank keeps.
const maxFreeRequests = 1 << 12

// Context pairs: pair k gives point-to-point traffic context 2k and the
// communicator's internal collectives context 2k+1, so that user messages
// never match collective ones. World is pair 0, Self pair 1.
const firstFreeCtx = 2

func newProc(ep *engine.Endpoint, closer func()) *proc {
	p := &proc{ep: ep, closer: closer, nextCtx: firstFreeCtx, thread: ThreadMultiple, universe: ep.Size()}
	n := ep.Size()
	ranks := make([]int, n)
	for i := range ranks {
		ranks[i] = i
	}
	p.world = newComm(p, newGroup(ranks, ep.Rank()), 0)
	p.world.name.Store(&worldName)
	p.self = newComm(p, newGroup([]int{ep.Rank()}, ep.Rank()), 1)
	p.self.name.Store(&selfName)
	return p
}

// The predefined communicators' names.
var worldName, selfName = "MPI_COMM_WORLD", "MPI_COMM_SELF"

// finalize is Finalize for one rank.
func (p *proc) finalize() error {
	var errs []error
	// Self's attributes go first, the last set first, while MPI still
	// works: the standard's hook for code at the end of MPI.
	if err := p.self.clearAttrs("Finalize"); err != nil {
		errs = append(errs, err)
	}
	if _, err := p.ep.BufferDetach(); err != nil && !errors.Is(err, engine.ErrBuffer) {
		errs = append(errs, err)
	}
	// By messages, not through shared memory: its packets follow on the
	// rings whatever this rank sent before, so that once it is done,
	// what is left is left (leftovers).
	if err := p.world.msgBarrier("Finalize"); err != nil {
		errs = append(errs, err)
	} else if left, n := p.leftovers(); n > 0 {
		// Every rank has called Finalize, and what each sent before is
		// here (its barrier packets came after): what is left stays so.
		errs = append(errs, leftoverError(left, n))
	}
	p.mu.Lock()
	p.end()
	p.mu.Unlock()
	p.ep.Close()
	p.unlabel()
	if p.closer != nil {
		p.closer()
	}
	if len(errs) > 0 {
		return finalizeError(errs)
	}
	return nil
}

// leftovers is the engine's Leftovers, up to maxLeftovers, but for the
// messages of collectives abandoned by their contexts.
func (p *proc) leftovers() ([]engine.Leftover, int) {
	p.mu.Lock()
	skip := p.abandoned
	p.mu.Unlock()
	if len(skip) == 0 {
		return p.ep.Leftovers(maxLeftovers)
	}
	all, _ := p.ep.Leftovers(math.MaxInt)
	var left []engine.Leftover
	n := 0
	for _, l := range all {
		if slices.Contains(skip, l.Ctx) {
			continue
		}
		if n++; len(left) < maxLeftovers {
			left = append(left, l)
		}
	}
	return left, n
}

// maxLeftovers bounds the unfinished operations Finalize names.
const maxLeftovers = 8

// leftoverError says what an erroneous program left unfinished at
// Finalize: messages no receive took, receives and sends still pending
// (MPI-4.1 section 11.2.2 wants every send matched by a receive and every
// nonblocking operation complete).
func leftoverError(left []engine.Leftover, n int) *Error {
	var b strings.Builder
	fmt.Fprintf(&b, "the program left %d operation(s) unfinished (erroneous: MPI-4.1 section 11.2.2)", n)
	for _, l := range left {
		b.WriteString("; ")
		switch l.Kind {
		case engine.Unreceived:
			fmt.Fprintf(&b, "a message from rank %d, tag %d, %d bytes, %s, that no receive took", l.Peer, l.Tag, l.Bytes, ctxLabel(l.Ctx))
			if l.Probed {
				b.WriteString(" (a matched probe took it: its Message was never received)")
			}
		case engine.PendingRecv:
			fmt.Fprintf(&b, "a receive from %s, %s, into %d bytes, %s, still pending", peerLabel(l.Peer), tagLabel(l.Tag), l.Bytes, ctxLabel(l.Ctx))
		case engine.PendingSend:
			fmt.Fprintf(&b, "a send to rank %d, tag %d, %d bytes, %s, that no receive finished taking", l.Peer, l.Tag, l.Bytes, ctxLabel(l.Ctx))
		}
		if l.Freed {
			b.WriteString(" (its request freed)")
		}
	}
	if n > len(left) {
		fmt.Fprintf(&b, "; and %d more", n-len(left))
	}
	return errorf(ErrOther, "Finalize", "%s", b.String())
}

// ctxLabel names the communicator of a context: World and Self by name,
// others by their context pair; odd contexts carry collectives.
func ctxLabel(ctx uint32) string {
	var s string
	switch ctx / 2 {
	case 0:
		s = "MPI_COMM_WORLD"
	case 1:
		s = "MPI_COMM_SELF"
	default:
		s = fmt.Sprintf("the communicator of context %d", ctx/2)
	}
	if ctx%2 == 1 {
		return "in a collective on " + s
	}
	return "on " + s
}

func peerLabel(r int) string {
	if r == AnySource {
		return "any source"
	}
	return fmt.Sprintf("rank %d", r)
}

func tagLabel(t int) string {
	if t == AnyTag {
		return "any tag"
	}
	return fmt.Sprintf("tag %d", t)
}

// finalizeError makes what Finalize ran into one error of one class: the
// first error's (ErrOther if it has none), so that errors.Is matches that
// class alone, with every error's text and cause kept.
func finalizeError(errs []error) *Error {
	out := &Error{Class: ErrOther, Op: "Finalize", Detail: "finalizing"}
	causes := make([]error, len(errs))
	for i, err := range errs {
		causes[i] = err
		var e *Error
		if !errors.As(err, &e) {
			continue
		}
		if i == 0 {
			out.Class = e.Class
		}
		// The inner Error's text and cause, not its class.
		if e.Err != nil {
			causes[i] = fmt.Errorf("%s: %s: %w", e.Op, e.Detail, e.Err)
		} else {
			causes[i] = errors.New(e.Op + ": " + e.Detail)
		}
	}
	out.Err = errors.Join(causes...)
	return out
}

// Tags of the internal collectives, on a communicator's collective
// context. Each collective's messages between two ranks are ordered, and
// MPI requires every rank to call collectives on a communicator in the
// same order, so fixed tags suffice.
const (
	tagBarrier = iota + 1
	tagGather
	tagClock   // Init's stamp exchanges (measureSkew)
	tagConnect // a connection's handshake within each group (connect.go)
)

// barrier is c's barrier: through c's collective area where it has one
// (collshm.go), else a dissemination barrier over c's collective context: in
// round k each rank signals rank+2^k and waits for rank-2^k. It runs as
// the other blocking collectives do (coll.go): two ranks make one
// exchange of empty messages, each sent before the receive that takes the
// engine's direct path.
func (c *Comm) barrier(op string) error {
	if err := c.collectiveLive(op); err != nil {
		return err
	}
	if c.shmState != shmOff {
		s, err := c.shmFor(op, collBarrier, 0)
		if err != nil {
			return err
		}
		if s != nil {
			return s.barrier(op)
		}
	}
	return c.runBarrier(op, true)
}

// msgBarrier is barrier by messages, on every communicator, flat: a
// message from every rank reaches some rank before the last leave.
func (c *Comm) msgBarrier(op string) error {
	if err := c.collectiveLive(op); err != nil {
		return err
	}
	return c.runBarrier(op, false)
}

// barrierContext is barrier bounded by ctx (BarrierContext). A context
// that has ended before it starts ends it before anything is sent; one
// that ends half way abandons it, with c's collectives (abandon).
func (c *Comm) barrierContext(op string, ctx context.Context) error {
	if err := c.collectiveLive(op); err != nil {
		return err
	}
	if ended(ctx.Done()) {
		return contextErr(op, c, ctx, ctx.Err())
	}
	n := c.size
	cctx := c.ctx + 1
	for k := 1; k < n; k <<= 1 {
		to := c.group.worldRank((c.rank + k) % n)
		from := c.group.worldRank((c.rank - k + n) % n)
		r, err := c.p.ep.Irecv(nil, from, tagBarrier, cctx)
		if err != nil {
			return c.engineErr(op, err)
		}
		if err := c.p.ep.SendContext(ctx, nil, to, tagBarrier, cctx, engine.Standard); err != nil {
			r.Cancel()
			r.Wait()
			return c.abandon(op, ctx, err)
		}
		if _, err := r.WaitOrCancel(ctx); err != nil {
			return c.abandon(op, ctx, err)
		}
	}
	return nil
}

// collectiveLive returns nil unless a collective on c was abandoned
// (abandon): the ranks' collectives on c are then out of step, and
// another would match the abandoned one's messages.
func (c *Comm) collectiveLive(op string) error {
	if c.abandoned.Load() {
		return errorf(ErrComm, op, "an earlier collective on %s was abandoned by its context: its ranks' collectives are out of step (use another communicator)", c.label())
	}
	return nil
}

// abandon returns the error err ended collective op on c with: a
// context's, which abandons the collective half way and with it every
// later collective on c (collectiveLive), or the engine's. The messages
// of an abandoned collective left unreceived are not Finalize's
// leftovers: the program was told.
func (c *Comm) abandon(op string, ctx context.Context, err error) error {
	if !isContextErr(ctx, err) {
		return c.engineErr(op, err)
	}
	if !c.abandoned.Swap(true) {
		c.p.mu.Lock()
		c.p.abandoned = append(c.p.abandoned, c.ctx+1)
		c.p.mu.Unlock()
	}
	return contextErr(op, c, ctx, err)
}

// allgather gives every rank of c the 8-byte words every rank contributed,
// in rank order.
func (c *Comm) allgather(op string, mine []uint64) ([][]uint64, error) {
	if err := c.collectiveLive(op); err != nil {
		return nil, err
	}
	n, ctx := c.size, c.ctx+1
	size := 8 * len(mine)
	out := make([]byte, size)
	for i, v := range mine {
		binary.LittleEndian.PutUint64(out[8*i:], v)
	}
	bufs := make([][]byte, n)
	reqs := make([]*engine.Request, 0, 2*n)
	var firstErr error
	for r := 0; r < n; r++ {
		if r == c.rank {
			bufs[r] = out
			continue
		}
		bufs[r] = make([]byte, size)
		rq, err := c.p.ep.Irecv(bufs[r], c.group.worldRank(r), tagGather, ctx)
		if err != nil {
			firstErr = err
			break
		}
		reqs = append(reqs, rq)
	}
	for r := 0; r < n && firstErr == nil; r++ {
		if r == c.rank {
			continue
		}
		rq, err := c.p.ep.Isend(out, c.group.worldRank(r), tagGather, ctx, engine.Standard)
		if err != nil {
			firstErr = err
			break
		}
		reqs = append(reqs, rq)
	}
	for _, rq := range reqs {
		if firstErr != nil {
			rq.Cancel()
		}
		if _, err := rq.Wait(); err != nil && firstErr == nil {
			firstErr = err
		}
	}
	if firstErr != nil {
		return nil, c.engineErr(op, firstErr)
	}
	vals := make([][]uint64, n)
	for r, b := range bufs {
		vals[r] = make([]uint64, len(mine))
		for i := range vals[r] {
			vals[r][i] = binary.LittleEndian.Uint64(b[8*i:])
		}
	}
	return vals, nil
}

// gatherBytes gives root every rank's bytes, in rank order; the other
// ranks get nil.
func (c *Comm) gatherBytes(op string, root int, mine []byte) ([][]byte, error) {
	ctx := c.ctx + 1
	if c.rank != root {
		return nil, c.engineErr(op, c.p.ep.Send(mine, c.group.worldRank(root), tagConnect, ctx, engine.Standard))
	}
	out := make([][]byte, c.size)
	out[root] = mine
	for r := range c.size {
		if r == root {
			continue
		}
		b, err := c.recvSized(op, c.group.worldRank(r), ctx)
		if err != nil {
			return nil, err
		}
		out[r] = b
	}
	return out, nil
}

// bcastBytes gives every rank root's bytes.
func (c *Comm) bcastBytes(op string, root int, data []byte) ([]byte, error) {
	ctx := c.ctx + 1
	if c.rank != root {
		return c.recvSized(op, c.group.worldRank(root), ctx)
	}
	for r := range c.size {
		if r == root {
			continue
		}
		if err := c.p.ep.Send(data, c.group.worldRank(r), tagConnect, ctx, engine.Standard); err != nil {
			return nil, c.engineErr(op, err)
		}
	}
	return data, nil
}

// recvSized receives the next handshake message from world rank w, of
// whatever size it is.
func (c *Comm) recvSized(op string, w int, ctx uint32) ([]byte, error) {
	st, err := c.p.ep.Probe(w, tagConnect, ctx)
	if err != nil {
		return nil, c.engineErr(op, err)
	}
	b := make([]byte, st.Count)
	if _, err := c.p.ep.Recv(b, w, tagConnect, ctx); err != nil {
		return nil, c.engineErr(op, err)
	}
	return b, nil
}
