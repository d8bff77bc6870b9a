package mpi

import (
	"context"
	"errors"
	"runtime"

	"github.com/tachyon-hpc/tachyon/asm"
	"github.com/tachyon-hpc/tachyon/engine"
	"github.com/tachyon-hpc/tachyon/progress"
)

// Deadlines and cancellation: the Context forms of the routines that can
// block. Their contract is the package's (doc.go, "Deadlines and
// cancellation"); docs/mpi.md has the figures.

// contextErr is the error of routine op on c (nil for none) for err, the
// error of a Context form's engine call: the context's end as ErrCanceled,
// its cause the context's error, any other as engineErr.
func contextErr(op string, c *Comm, ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if !isContextErr(ctx, err) {
		if c == nil {
			return &Error{Class: ErrOther, Op: op, Detail: "waiting", Err: err}
		}
		return c.classify(op, err)
	}
	detail := "the context ended first"
	if c != nil {
		detail += " on " + c.label()
	}
	if cause := context.Cause(ctx); cause != nil && cause != err {
		detail += " (cause: " + cause.Error() + ")"
	}
	return &Error{Class: ErrCanceled, Op: op, Detail: detail, Err: err}
}

// isContextErr reports whether err is what a wait bounded by ctx returns
// when ctx ends: its error, or one of the two a context's can be.
func isContextErr(ctx context.Context, err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || err == ctx.Err()
}

// nilContext is the error of a Context form op passed a nil context.
func nilContext(op string) *Error { return errorf(ErrArg, op, "nil context.Context") }

// ended reports whether done, a context's Done, is closed, without
// blocking; a nil done never is.
func ended(done <-chan struct{}) bool {
	select {
	case <-done:
		return true
	default:
		return false
	}
}

// contextName is the name of the Context form of op, for its errors.
func contextName(op Op) string {
	switch op {
	case OpSend:
		return "SendContext"
	case OpSsend:
		return "SsendContext"
	case OpRsend:
		return "RsendContext"
	case OpSendLayout:
		return "SendLayoutContext"
	case OpSsendLayout:
		return "SsendLayoutContext"
	case OpRsendLayout:
		return "RsendLayoutContext"
	}
	return op.String() + "Context"
}

// cancelledStatus is the status of a receive a context withdrew.
var cancelledStatus = Status{Source: AnySource, Tag: AnyTag, Cancelled: true}

// SendContext is Send bounded by ctx: nil once buf may be reused, or an
// ErrCanceled error if ctx ends first, the message then withdrawn whole
// (or, if its receive had matched, delivered whole, and nil returned).
func (c *Comm) SendContext(ctx context.Context, buf []byte, dest, tag int) error {
	return sendContextEntry(c, ctx, buf, dest, tag)
}

// sendContextTooled is SendContext through the interceptors.
func (c *Comm) sendContextTooled(ctx context.Context, buf []byte, dest, tag int) error {
	return c.sendContextModeEntry(ctx, OpSend, buf, dest, tag)
}

// pSendContext is SendContext without interception: Send's usual case,
// the same IsendNow, with the context only for the wait.
func (c *Comm) pSendContext(ctx context.Context, buf []byte, dest, tag int) error {
	if ctx != nil && c.usual(dest, tag) { // checked in line
		var s engine.Sent // a send that went out at once stands: its name goes unused
		er, err := c.p.ep.IsendNow(buf, c.worldOf(dest), tag, c.ctx, engine.Standard, &s)
		if er == nil && err == nil {
			return nil
		}
		return c.sendContextPending(ctx, er, err)
	}
	return c.pSendContextMode(ctx, OpSend, buf, dest, tag)
}

// sendContextPending is SendContext's usual case when the message did not
// go out at once: it waits for the engine request IsendNow started, or
// withdraws it when ctx ends (or reports why it started none).
func (c *Comm) sendContextPending(ctx context.Context, er *engine.Request, err error) error {
	if err == nil {
		_, err = er.WaitOrCancel(ctx)
	}
	return c.fail(contextErr("SendContext", c, ctx, err))
}

// SsendContext is Ssend bounded by ctx, as SendContext: a synchronous
// send the context ended is withdrawn unless its receive has started.
func (c *Comm) SsendContext(ctx context.Context, buf []byte, dest, tag int) error {
	return c.sendContextModeEntry(ctx, OpSsend, buf, dest, tag)
}

// RsendContext is Rsend bounded by ctx, as SendContext.
func (c *Comm) RsendContext(ctx context.Context, buf []byte, dest, tag int) error {
	return c.sendContextModeEntry(ctx, OpRsend, buf, dest, tag)
}

// sendContextModeEntry is the entry of the Context form of the blocking
// send op: through the interceptors, if any, else to pSendContextMode.
func (c *Comm) sendContextModeEntry(ctx context.Context, op Op, buf []byte, dest, tag int) error {
	if ctx == nil {
		return c.fail(nilContext(contextName(op)))
	}
	if intercepted() {
		call := peerCall(op, c, buf, dest, tag)
		call.Ctx = ctx
		return call.run()
	}
	return c.pSendContextMode(ctx, op, buf, dest, tag)
}

// pSendContextMode is the Context form of the send op, without
// interception, in every case.
func (c *Comm) pSendContextMode(ctx context.Context, op Op, buf []byte, dest, tag int) error {
	if ctx == nil {
		return c.fail(nilContext(contextName(op)))
	}
	return c.sendContextEngine(ctx, contextName(op), buf, dest, tag, sendMode(op))
}

// sendContextEngine is pSendMode bounded by ctx: the checks, then the
// engine's send.
func (c *Comm) sendContextEngine(ctx context.Context, op string, buf []byte, dest, tag int, mode engine.Mode) error {
	if err := c.check(op); err != nil {
		return err
	}
	if err := c.checkDest(op, dest, tag); err != nil {
		return c.fail(err)
	}
	if dest == ProcNull {
		return nil
	}
	return c.fail(contextErr(op, c, ctx, c.p.ep.SendContext(ctx, buf, c.worldOf(dest), tag, c.ctx, mode)))
}

// RecvContext is Recv bounded by ctx: the message received, or an
// ErrCanceled error if ctx ends first, with no message consumed (the next
// receive gets it) and a status whose Cancelled is set. A message that
// had matched when ctx ended is received, with no error.
func (c *Comm) RecvContext(ctx context.Context, buf []byte, source, tag int) (Status, error) {
	return recvContextEntry(c, ctx, buf, source, tag)
}

// recvContextTooled is RecvContext through the interceptors.
func (c *Comm) recvContextTooled(ctx context.Context, buf []byte, source, tag int) (Status, error) {
	if ctx == nil {
		return Status{}, c.fail(nilContext("RecvContext"))
	}
	call := peerCall(OpRecv, c, buf, source, tag)
	call.Ctx = ctx
	return call.runStatus()
}

// pRecvContext is RecvContext without interception.
func (c *Comm) pRecvContext(ctx context.Context, buf []byte, source, tag int) (Status, error) {
	const op = "RecvContext"
	if ctx != nil && c.usual(source, tag) { // checked in line: neither a wildcard nor ProcNull
		st, err := c.p.ep.RecvContext(ctx, buf, c.worldOf(source), tag, c.ctx)
		if err == nil {
			return c.status(st), nil
		}
		return c.recvContextErr(op, ctx, st, err)
	}
	if ctx == nil {
		return Status{}, c.fail(nilContext(op))
	}
	src, null, err := c.recvArgs(op, source, tag)
	if err != nil {
		return Status{}, err
	}
	if null {
		return procNullStatus, nil
	}
	st, err := c.p.ep.RecvContext(ctx, buf, src, tag, c.ctx)
	if err == nil {
		return c.status(st), nil
	}
	return c.recvContextErr(op, ctx, st, err)
}

// recvContextErr is the result of a receive bounded by ctx that failed
// with err (engine status st): cancelledStatus for the context's end, the
// status of what was stored for a truncation.
func (c *Comm) recvContextErr(op string, ctx context.Context, st engine.Status, err error) (Status, error) {
	err = c.fail(contextErr(op, c, ctx, err))
	if errors.Is(err, ErrCanceled) {
		return cancelledStatus, err
	}
	return c.status(st), err
}

// SendrecvContext is Sendrecv bounded by ctx. If ctx ends first it
// returns an ErrCanceled error; each half is then withdrawn or done whole
// as SendContext's and RecvContext's are, and the status says which for
// the receive: Cancelled if it was withdrawn, else the message's, in
// recvbuf. (Whether the send was delivered the error does not say: a
// program that must know sends and receives apart.)
func (c *Comm) SendrecvContext(ctx context.Context, sendbuf []byte, dest, sendtag int, recvbuf []byte, source, recvtag int) (Status, error) {
	if ctx == nil {
		return Status{}, c.fail(nilContext("SendrecvContext"))
	}
	if intercepted() {
		call := peerCall(OpSendrecv, c, sendbuf, dest, sendtag)
		call.buf2, call.RecvPeer, call.RecvTag, call.Ctx = recvbuf, source, recvtag, ctx
		return call.runStatus()
	}
	return c.pSendrecvContext(ctx, sendbuf, dest, sendtag, recvbuf, source, recvtag)
}

// pSendrecvContext is SendrecvContext without interception.
func (c *Comm) pSendrecvContext(ctx context.Context, sendbuf []byte, dest, sendtag int, recvbuf []byte, source, recvtag int) (Status, error) {
	const op = "SendrecvContext"
	if err := c.check(op); err != nil {
		return Status{}, err
	}
	if err := c.checkDest(op, dest, sendtag); err != nil {
		return Status{}, c.fail(err)
	}
	src, null, err := c.recvArgs(op, source, recvtag)
	if err != nil {
		return Status{}, err
	}
	var er *engine.Request
	if !null {
		if er, err = c.p.ep.Irecv(recvbuf, src, recvtag, c.ctx); err != nil {
			return Status{}, c.fail(c.engineErr(op, err))
		}
	}
	var serr error
	if dest != ProcNull {
		serr = c.p.ep.SendContext(ctx, sendbuf, c.worldOf(dest), sendtag, c.ctx, engine.Standard)
		if serr != nil && !isContextErr(ctx, serr) {
			if er != nil {
				er.Cancel()
				er.Wait()
			}
			return Status{}, c.fail(c.engineErr(op, serr))
		}
	}
	if er == nil {
		return procNullStatus, c.fail(contextErr(op, c, ctx, serr))
	}
	st, rerr := er.WaitOrCancel(ctx)
	switch {
	case rerr != nil && isContextErr(ctx, rerr):
		return cancelledStatus, c.fail(contextErr(op, c, ctx, rerr))
	case serr != nil: // the send was withdrawn; the receive completed
		return c.status(st), c.fail(contextErr(op, c, ctx, serr))
	}
	return c.status(st), c.fail(c.engineErr(op, rerr))
}

// ProbeContext is Probe bounded by ctx: the status of a message that can
// be received, or an ErrCanceled error if ctx ends first.
func (c *Comm) ProbeContext(ctx context.Context, source, tag int) (Status, error) {
	if ctx == nil {
		return Status{}, c.fail(nilContext("ProbeContext"))
	}
	if intercepted() {
		call := peerCall(OpProbe, c, nil, source, tag)
		call.Ctx = ctx
		return call.runStatus()
	}
	return c.pProbeContext(ctx, source, tag)
}

// pProbeContext is ProbeContext without interception.
func (c *Comm) pProbeContext(ctx context.Context, source, tag int) (Status, error) {
	const op = "ProbeContext"
	src, null, err := c.recvArgs(op, source, tag)
	if err != nil {
		return Status{}, err
	}
	if null {
		return procNullStatus, nil
	}
	st, err := c.p.ep.ProbeContext(ctx, src, tag, c.ctx)
	if err != nil {
		return Status{}, c.fail(contextErr(op, c, ctx, err))
	}
	return c.status(st), nil
}

// WaitContext is Wait bounded by ctx: r's status once it completes, or
// an ErrCanceled error if ctx ends first, r then still active (wait for
// it again, test, cancel or free it). A nil or inactive request returns
// an empty status at once.
func (r *Request) WaitContext(ctx context.Context) (Status, error) {
	return waitContextEntry(r, ctx)
}

// waitContextTooled is WaitContext through the interceptors.
func (r *Request) waitContextTooled(ctx context.Context) (Status, error) {
	if ctx == nil {
		return Status{}, r.fail(nilContext("WaitContext"))
	}
	call := requestCall(OpWait, r)
	call.Ctx = ctx
	return call.runStatus()
}

// pWaitContext is WaitContext without interception.
func (r *Request) pWaitContext(ctx context.Context) (Status, error) {
	if ctx != nil && r != nil && r.plain() {
		if er := r.er; er != nil {
			if err := r.c.p.ep.Progress().WaitContext(ctx, &er.Completion); err != nil {
				return Status{}, r.c.fail(contextErr("WaitContext", r.c, ctx, err))
			}
		}
		r.inactive = true
		return r.collect(true)
	}
	if ctx == nil {
		return Status{}, r.fail(nilContext("WaitContext"))
	}
	if err := r.usable("WaitContext"); err != nil {
		return Status{}, err
	}
	if !r.active() {
		return emptyStatus, nil
	}
	if c, e := r.completion(); c != nil {
		if err := e.WaitContext(ctx, c); err != nil {
			return Status{}, r.fail(contextErr("WaitContext", r.c, ctx, err))
		}
	}
	return r.finish()
}

// WaitallContext is Waitall bounded by ctx: once every request of reqs
// has completed it collects them as Waitall does; if ctx ends first it
// returns an ErrCanceled error and leaves every request as it was (those
// complete by then too: Waitall, Test or WaitallContext collects them
// later).
func WaitallContext(ctx context.Context, reqs []*Request) ([]Status, error) {
	if ctx == nil {
		return nil, firstFail(reqs, nilContext("WaitallContext"))
	}
	if intercepted() {
		call := requestsCall(OpWaitall, reqs)
		call.Ctx = ctx
		res, err := call.runOn(reqs, nil)
		return res.Statuses, err
	}
	return pWaitallContext(ctx, reqs)
}

// pWaitallContext is WaitallContext without interception.
func pWaitallContext(ctx context.Context, reqs []*Request) ([]Status, error) {
	if err := waitDoneContext(ctx, "WaitallContext", reqs); err != nil {
		return nil, err
	}
	return pWaitall(reqs)
}

// waitDoneContext waits, within ctx, until no active request of reqs
// needs more waiting, collecting none; it returns op's error if a
// request is unusable or ctx ends first.
func waitDoneContext(ctx context.Context, op string, reqs []*Request) error {
	for _, r := range reqs {
		if err := r.usable(op); err != nil {
			return err
		}
	}
	for _, r := range reqs {
		if c, e := r.completionIfActive(); c != nil {
			if err := e.WaitContext(ctx, c); err != nil {
				return r.fail(contextErr(op, r.c, ctx, err))
			}
		}
	}
	return nil
}

// WaitanyContext is Waitany bounded by ctx: the index and status of a
// request of reqs that completed, its entry set to nil as Waitany does,
// or Undefined and an ErrCanceled error if ctx ends first, every request
// left as it was.
func WaitanyContext(ctx context.Context, reqs []*Request) (int, Status, error) {
	if ctx == nil {
		return Undefined, Status{}, firstFail(reqs, nilContext("WaitanyContext"))
	}
	if intercepted() {
		call := requestsCall(OpWaitany, reqs)
		call.Ctx = ctx
		res, err := call.runOn(reqs, nil)
		return res.Index, res.Status, err
	}
	return pWaitanyContext(ctx, reqs)
}

// pWaitanyContext is WaitanyContext without interception.
func pWaitanyContext(ctx context.Context, reqs []*Request) (int, Status, error) {
	for _, r := range reqs {
		if err := r.usable("WaitanyContext"); err != nil {
			return Undefined, Status{}, err
		}
	}
	i, err := waitAnyContext(ctx, reqs)
	if err != nil {
		return Undefined, Status{}, firstFail(reqs, contextErr("WaitanyContext", firstComm(reqs), ctx, err))
	}
	if i < 0 {
		return Undefined, emptyStatus, nil
	}
	st, err := take(reqs, i)
	return i, st, err
}

// WaitsomeContext is Waitsome bounded by ctx: the indices and statuses
// of the requests of reqs that completed, collected as Waitsome does, or
// an ErrCanceled error if ctx ends before any does, every request left as
// it was.
func WaitsomeContext(ctx context.Context, reqs []*Request) ([]int, []Status, error) {
	if ctx == nil {
		return nil, nil, firstFail(reqs, nilContext("WaitsomeContext"))
	}
	if intercepted() {
		call := requestsCall(OpWaitsome, reqs)
		call.Ctx = ctx
		res, err := call.runOn(reqs, nil)
		return res.Indices, res.Statuses, err
	}
	return pWaitsomeContext(ctx, reqs)
}

// pWaitsomeContext is WaitsomeContext without interception.
func pWaitsomeContext(ctx context.Context, reqs []*Request) ([]int, []Status, error) {
	for _, r := range reqs {
		if err := r.usable("WaitsomeContext"); err != nil {
			return nil, nil, err
		}
	}
	i, err := waitAnyContext(ctx, reqs)
	if err != nil {
		return nil, nil, firstFail(reqs, contextErr("WaitsomeContext", firstComm(reqs), ctx, err))
	}
	if i < 0 {
		return nil, nil, nil
	}
	return collectDone(reqs)
}

// firstComm returns the communicator of the first request of reqs that
// has one, nil if none.
func firstComm(reqs []*Request) *Comm {
	for _, r := range reqs {
		if r != nil && r.c != nil {
			return r.c
		}
	}
	return nil
}

// firstFail applies to err the error handler of the first request of
// reqs with a communicator, or the process's Self's.
func firstFail(reqs []*Request, err error) error {
	if c := firstComm(reqs); c != nil {
		return c.fail(err)
	}
	return noComm(err)
}

// waitAnyContext is waitAny bounded by ctx: the index of an active
// request of reqs that needs no more waiting, -1 if none is active, or
// ctx's error if ctx ends first.
func waitAnyContext(ctx context.Context, reqs []*Request) (int, error) {
	i, any := ready(reqs)
	if i >= 0 || !any {
		return i, nil
	}
	var eng *progress.Engine
	cs := make([]*progress.Completion, len(reqs))
	single := true
	for j, r := range reqs {
		c, e := r.completionIfActive()
		cs[j] = c
		if e == nil {
			continue
		}
		if eng == nil {
			eng = e
		} else if e != eng {
			single = false
		}
	}
	if single {
		return eng.WaitAnyContext(ctx, cs)
	}
	done := ctx.Done()
	for spins := 0; ; spins++ {
		pollAll(reqs)
		if i, _ := ready(reqs); i >= 0 {
			return i, nil
		}
		if ended(done) {
			return -1, ctx.Err()
		}
		if spins < 1000 {
			asm.Pause()
		} else {
			runtime.Gosched()
		}
	}
}

// BarrierContext is Barrier bounded by ctx: nil once every rank of c has
// called it, or an ErrCanceled error if ctx ends first. A context that
// has ended when it is called ends it before anything is sent, and c
// stays usable; one that ends half way abandons the barrier, and every
// later collective on c (Barrier, BarrierContext, Dup, Split, Create,
// and Finalize's barrier on World) fails with ErrComm, since the ranks'
// collectives on c are out of step for good. The other ranks are not
// told: theirs may wait or fail.
func (c *Comm) BarrierContext(ctx context.Context) error {
	if ctx == nil {
		return c.fail(nilContext("BarrierContext"))
	}
	if intercepted() {
		call := newCall(OpBarrier, c)
		call.Ctx = ctx
		return call.run()
	}
	return c.pBarrierContext(ctx)
}

// pBarrierContext is BarrierContext without interception.
func (c *Comm) pBarrierContext(ctx context.Context) error {
	if err := c.check("BarrierContext"); err != nil {
		return err
	}
	return c.fail(c.coll.barrierContext("BarrierContext", ctx))
}

// BufferDetachContext is BufferDetach bounded by ctx: the buffer once
// every buffered message has left it, or an ErrCanceled error if ctx ends
// first, the buffer then still attached. Ranks of Run use
// Comm.BufferDetachContext.
func BufferDetachContext(ctx context.Context) ([]byte, error) {
	p := current()
	if p == nil {
		return nil, notInitialized("BufferDetachContext", "BufferDetachContext (c.BufferDetachContext)")
	}
	return p.world.BufferDetachContext(ctx)
}

// BufferDetachContext is the package's BufferDetachContext for the rank
// c belongs to.
func (c *Comm) BufferDetachContext(ctx context.Context) ([]byte, error) {
	const op = "BufferDetachContext"
	if err := c.check(op); err != nil {
		return nil, err
	}
	if ctx == nil {
		return nil, c.fail(nilContext(op))
	}
	if intercepted() {
		call := newCall(OpBufferDetach, c)
		call.Ctx = ctx
		r, err := call.runResult()
		return r.Buffer, err
	}
	return c.pBufferDetachContext(ctx)
}

// pBufferDetachContext is BufferDetachContext without interception.
func (c *Comm) pBufferDetachContext(ctx context.Context) ([]byte, error) {
	const op = "BufferDetachContext"
	if err := c.check(op); err != nil {
		return nil, err
	}
	if ctx == nil { // an interceptor took it away
		ctx = context.Background()
	}
	b, err := c.p.ep.BufferDetachContext(ctx)
	switch {
	case err == nil:
		return b, nil
	case isContextErr(ctx, err):
		return nil, c.fail(contextErr(op, c, ctx, err))
	}
	return nil, c.fail(&Error{Class: ErrBuffer, Op: op, Detail: "detaching", Err: err})
}

// SendLayoutContext is SendLayout bounded by ctx, as SendContext.
func (c *Comm) SendLayoutContext(ctx context.Context, buf []byte, l Layout, dest, tag int) error {
	return c.sendLayoutContextModeEntry(ctx, OpSendLayout, buf, l, dest, tag)
}

// SsendLayoutContext is SsendLayout bounded by ctx, as SsendContext.
func (c *Comm) SsendLayoutContext(ctx context.Context, buf []byte, l Layout, dest, tag int) error {
	return c.sendLayoutContextModeEntry(ctx, OpSsendLayout, buf, l, dest, tag)
}

// RsendLayoutContext is RsendLayout bounded by ctx, as SendContext.
func (c *Comm) RsendLayoutContext(ctx context.Context, buf []byte, l Layout, dest, tag int) error {
	return c.sendLayoutContextModeEntry(ctx, OpRsendLayout, buf, l, dest, tag)
}

// sendLayoutContextModeEntry is the entry of the Context form of the
// blocking layout send op: through the interceptors, if any, else to
// pSendLayoutContextMode.
func (c *Comm) sendLayoutContextModeEntry(ctx context.Context, op Op, buf []byte, l Layout, dest, tag int) error {
	if ctx == nil {
		return c.fail(nilContext(contextName(op)))
	}
	if intercepted() {
		call := layoutCall(op, c, buf, l, dest, tag)
		call.Ctx = ctx
		return call.run()
	}
	return c.pSendLayoutContextMode(ctx, op, buf, l, dest, tag)
}

// pSendLayoutContextMode is the Context form of pSendLayoutMode.
func (c *Comm) pSendLayoutContextMode(ctx context.Context, op Op, buf []byte, l Layout, dest, tag int) error {
	name := contextName(op)
	m, err := c.layoutMessage(name, buf, l)
	if err != nil {
		return err
	}
	return c.sendContextEngine(ctx, name, m, dest, tag, sendMode(op))
}

// RecvLayoutContext is RecvLayout bounded by ctx, as RecvContext: if ctx
// ends first nothing is consumed and buf is left as it was.
func (c *Comm) RecvLayoutContext(ctx context.Context, buf []byte, l Layout, source, tag int) (Status, error) {
	if ctx == nil {
		return Status{}, c.fail(nilContext("RecvLayoutContext"))
	}
	if intercepted() {
		call := layoutCall(OpRecvLayout, c, buf, l, source, tag)
		call.Ctx = ctx
		return call.runStatus()
	}
	return c.pRecvLayoutContext(ctx, buf, l, source, tag)
}

// pRecvLayoutContext is RecvLayoutContext without interception.
func (c *Comm) pRecvLayoutContext(ctx context.Context, buf []byte, l Layout, source, tag int) (Status, error) {
	if err := c.checkRecvLayout("RecvLayoutContext", buf, l); err != nil {
		return Status{}, err
	}
	if isContiguousPrefix(l) {
		return c.pRecvContext(ctx, buf[:l.Size()], source, tag)
	}
	packed := make([]byte, l.Size())
	st, err := c.pRecvContext(ctx, packed, source, tag)
	if err != nil && ErrorClass(err) != ErrTruncate {
		return st, err
	}
	if _, uerr := l.unpack(buf, packed[:st.Count]); uerr != nil {
		return st, c.fail(uerr)
	}
	return st, err
}
