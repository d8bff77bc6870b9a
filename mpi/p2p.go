package mpi

import (
	"github.com/tachyon-hpc/tachyon/engine"
)

// Names that say their layer. A routine X of the facade is built of the
// layers below, from the caller down; it has only those it needs, and
// each function's name says which one it is. The rule holds in this file
// and in those built like it: context.go, layoutcomm.go, persistent.go,
// message.go, received.go and request.go.
//
//	X           the exported routine (MPI_X). Its body is its entry, which
//	            chooses the interceptors or the routine's own code: one call
//	            through the function variable xEntry (intercept.go) for the
//	            routines of the message path, else intercepted() in line.
//	xTooled     X through the interceptors, where X has an xEntry: it
//	            builds the Call and runs the chain, whose end (invoke)
//	            calls pX.
//	pX          X without interception (PMPI_X): the routine's own code,
//	            which the facade's internal callers call too. On the
//	            message path it starts with the usual case, checked in line
//	            (Comm.usual).
//	xPending    the rest of pX's usual case when the engine did not finish
//	            at once (a send that did not go out in one packet): it
//	            waits for, or wraps, the engine request that was started.
//	xGeneral    pX past its usual case, where that is out of line.
//	xEngine     the checks (communicator, ranks, tag, ProcNull) and the
//	            call into the engine that every mode and form of X shares;
//	            xChecked, where it is apart, is the engine call alone, for
//	            arguments xEngine has checked.
//
// Routines that differ only in their mode (Ssend, Rsend, Bsend; Issend,
// Irsend, Ibsend; the persistent Inits; the Layout and Context forms of
// the sends) share one entry and one body, which take the Op:
//
//	xModeEntry  the family's entry: through the interceptors, if any, else
//	            to pXMode.
//	pXMode      the family's body without interception, which invoke calls
//	            (the blocking sends' is also their xEngine, pSendMode).
//
// Helpers that are no layer of one routine (checkDest, recvArgs, request,
// status, layoutMessage) are named for what they do. pSend, pRecv, pIsend,
// pIrecv and the layers below them are named in bench/default.pgo, which
// matches functions by name: renaming one means remaking the profile
// (bench/pgo.sh), or the message path loses the inlining
// TestProfileInlining checks.

// Status of a completed receive, probe or request.
type Status struct {
	Source    int  // rank of the sender in the communicator
	Tag       int  // the message's tag
	Count     int  // bytes received (or that a probe found)
	Cancelled bool // MPI_Test_cancelled
}

// emptyStatus is the status of a request that does nothing: a null or
// inactive request (MPI's empty status).
var emptyStatus = Status{Source: AnySource, Tag: AnyTag}

// procNullStatus is the status of a receive from ProcNull.
var procNullStatus = Status{Source: ProcNull, Tag: AnyTag}

func (c *Comm) checkDest(op string, dest, tag int) error {
	if dest != ProcNull && (dest < 0 || dest >= c.psize) {
		return errorf(ErrRank, op, "destination %d is not a rank of a %d-rank %s (nor ProcNull)", dest, c.psize, c.peerGroupWord())
	}
	if tag < 0 || tag > TagUB {
		return errorf(ErrTag, op, "tag %d is not in [0, TagUB]", tag)
	}
	return nil
}

func (c *Comm) checkSource(op string, source, tag int) error {
	if source != ProcNull && source != AnySource && (source < 0 || source >= c.psize) {
		return errorf(ErrRank, op, "source %d is not a rank of a %d-rank %s (nor AnySource, ProcNull)", source, c.psize, c.peerGroupWord())
	}
	if tag != AnyTag && (tag < 0 || tag > TagUB) {
		return errorf(ErrTag, op, "tag %d is not in [0, TagUB] nor AnyTag", tag)
	}
	return nil
}

// recvArgs checks the arguments of a receive or probe and returns the
// world rank to receive from (or AnySource), or null for ProcNull.
func (c *Comm) recvArgs(op string, source, tag int) (src int, null bool, err error) {
	if err := c.check(op); err != nil {
		return 0, false, err
	}
	if err := c.checkSource(op, source, tag); err != nil {
		return 0, false, c.fail(err)
	}
	if source == ProcNull {
		return 0, true, nil
	}
	if source == AnySource {
		return AnySource, false, nil
	}
	return c.worldOf(source), false, nil
}

// status turns an engine status into c's terms.
func (c *Comm) status(st engine.Status) Status {
	return Status{Source: c.commRank(st.Source), Tag: st.Tag, Count: st.Count, Cancelled: st.Cancelled}
}

// pSendMode is the blocking send op (Send, Ssend, Rsend, Bsend, their
// Layout forms) without interception: the checks and the engine call they
// all share, Send's past its usual case.
func (c *Comm) pSendMode(op Op, buf []byte, dest, tag int) error {
	name, mode := op.String(), sendMode(op)
	if err := c.check(name); err != nil {
		return err
	}
	if err := c.checkDest(name, dest, tag); err != nil {
		return c.fail(err)
	}
	if dest == ProcNull {
		return nil
	}
	return c.fail(c.engineErr(name, c.p.ep.Send(buf, c.worldOf(dest), tag, c.ctx, mode)))
}

// Send sends buf to rank dest of c with tag (MPI_SEND) and returns once
// buf may be reused. Small messages are copied out at once; large ones
// wait for the matching receive.
func (c *Comm) Send(buf []byte, dest, tag int) error {
	return sendEntry(c, buf, dest, tag)
}

// sendTooled is Send through the interceptors.
func (c *Comm) sendTooled(buf []byte, dest, tag int) error {
	return peerCall(OpSend, c, buf, dest, tag).run()
}

// pSend is Send without interception (PMPI_Send).
func (c *Comm) pSend(buf []byte, dest, tag int) error {
	if c.usual(dest, tag) { // checked in line
		var s engine.Sent // a blocking send is never cancelled: its name goes unused
		er, err := c.p.ep.IsendNow(buf, c.worldOf(dest), tag, c.ctx, engine.Standard, &s)
		if er == nil && err == nil {
			return nil
		}
		return c.sendPending(er, err)
	}
	return c.pSendMode(OpSend, buf, dest, tag)
}

// sendModeEntry is the entry of Ssend, Rsend and Bsend: through the
// interceptors, if any, else to pSendMode.
func (c *Comm) sendModeEntry(op Op, buf []byte, dest, tag int) error {
	if intercepted() {
		return peerCall(op, c, buf, dest, tag).run()
	}
	return c.pSendMode(op, buf, dest, tag)
}

// sendPending is Send's usual case when the message did not go out at
// once: it waits for the engine request IsendNow started (or reports why
// it started none).
func (c *Comm) sendPending(er *engine.Request, err error) error {
	if err == nil {
		err = er.WaitErr()
	}
	return c.fail(c.engineErr("Send", err))
}

// Ssend is Send that returns only after the matching receive has started
// (MPI_SSEND).
func (c *Comm) Ssend(buf []byte, dest, tag int) error {
	return c.sendModeEntry(OpSsend, buf, dest, tag)
}

// Rsend is Send for when the matching receive is known to be posted
// (MPI_RSEND); it is sent as Send.
func (c *Comm) Rsend(buf []byte, dest, tag int) error {
	return c.sendModeEntry(OpRsend, buf, dest, tag)
}

// Bsend copies buf into the attached buffer (BufferAttach) and returns at
// once (MPI_BSEND). It returns ErrBuffer if no buffer is attached or it
// lacks room.
func (c *Comm) Bsend(buf []byte, dest, tag int) error {
	return c.sendModeEntry(OpBsend, buf, dest, tag)
}

// Recv receives a message from rank source (or AnySource) with tag (or
// AnyTag) into buf (MPI_RECV). A message longer than buf fills it and
// returns ErrTruncate; Status.Count says how much arrived.
func (c *Comm) Recv(buf []byte, source, tag int) (Status, error) {
	return recvEntry(c, buf, source, tag)
}

// recvTooled is Recv through the interceptors.
func (c *Comm) recvTooled(buf []byte, source, tag int) (Status, error) {
	return peerCall(OpRecv, c, buf, source, tag).runStatus()
}

// pRecv is Recv without interception (PMPI_Recv).
func (c *Comm) pRecv(buf []byte, source, tag int) (Status, error) {
	const op = "Recv"
	if c.usual(source, tag) { // checked in line: neither a wildcard nor ProcNull
		st, err := c.p.ep.Recv(buf, c.worldOf(source), tag, c.ctx)
		return c.status(st), c.fail(c.engineErr(op, err))
	}
	src, null, err := c.recvArgs(op, source, tag)
	if err != nil {
		return Status{}, err
	}
	if null {
		return procNullStatus, nil
	}
	st, err := c.p.ep.Recv(buf, src, tag, c.ctx)
	return c.status(st), c.fail(c.engineErr(op, err))
}

// isendEngine is the nonblocking send's checks and engine call, for every
// mode, Isend past its usual case and Start. It starts a send for op: the engine request; or, for a standard or
// ready send that went out at once in one short packet, no request and
// the message's name (kept for a cancel); or, to ProcNull, neither and the
// status of a send complete at once.
func (c *Comm) isendEngine(op opcode, buf []byte, dest, tag int, mode engine.Mode) (*engine.Request, engine.Sent, Status, error) {
	if err := c.check(op.String()); err != nil {
		return nil, engine.Sent{}, Status{}, err
	}
	if err := c.checkDest(op.String(), dest, tag); err != nil {
		return nil, engine.Sent{}, Status{}, c.fail(err)
	}
	if dest == ProcNull {
		return nil, engine.Sent{}, Status{Source: ProcNull, Tag: AnyTag}, nil
	}
	er, s, err := c.isendChecked(op, buf, dest, tag, mode)
	return er, s, Status{}, err
}

// isendChecked is isendEngine's engine call, for arguments it has
// checked: the send goes out at once
// without an engine request if it can go as one short packet, else
// through an engine request.
func (c *Comm) isendChecked(op opcode, buf []byte, dest, tag int, mode engine.Mode) (*engine.Request, engine.Sent, error) {
	var s engine.Sent
	er, err := c.p.ep.IsendNow(buf, c.worldOf(dest), tag, c.ctx, mode, &s)
	if err != nil {
		return nil, engine.Sent{}, c.fail(c.engineErr(op.String(), err))
	}
	return er, s, nil
}

// request wraps what isendEngine or irecvEngine started for op.
func (c *Comm) request(op opcode, er *engine.Request, s engine.Sent, st Status, err error) (*Request, error) {
	switch {
	case err != nil:
		return nil, err
	case er == nil && !s.Valid():
		return doneRequest(c, st), nil
	case er != nil:
		r := c.p.requestFor(er)
		*r = Request{c: c, er: er, sent: s, op: op}
		return r, nil
	}
	r := c.p.newRequest()
	*r = Request{c: c, sent: s, op: op}
	return r, nil
}

// Isend starts a send (MPI_ISEND); buf must not change until the request
// completes.
func (c *Comm) Isend(buf []byte, dest, tag int) (*Request, error) {
	return isendEntry(c, buf, dest, tag)
}

// isendTooled is Isend through the interceptors.
func (c *Comm) isendTooled(buf []byte, dest, tag int) (*Request, error) {
	return peerCall(OpIsend, c, buf, dest, tag).runRequest()
}

// pIsend is Isend without interception (PMPI_Isend).
func (c *Comm) pIsend(buf []byte, dest, tag int) (*Request, error) {
	if c.usual(dest, tag) { // checked in line
		if r := c.p.takeFree(); r != nil { // clean but for these (proc.reqFree): set without zeroing
			r.c, r.op, r.inactive, r.hot = c, opIsend, false, hotSent
			er, err := c.p.ep.IsendNow(buf, c.worldOf(dest), tag, c.ctx, engine.Standard, &r.sent)
			if er == nil && err == nil {
				return r, nil // sent at once: r.sent names it
			}
			c.p.giveBack(r) // as clean as it came: IsendNow left r.sent zero
			return c.isendPending(er, err)
		}
	}
	return c.isendGeneral(buf, dest, tag)
}

// isendGeneral is Isend past its usual case (arguments the general checks
// must look at, an empty free stack, ThreadMultiple). A message that
// left at once gets its request marked as the usual case marks it, so
// that WaitallInto collects it in line, onto the free stack that the
// usual case takes from: a loop's first window fills the stack.
func (c *Comm) isendGeneral(buf []byte, dest, tag int) (*Request, error) {
	er, s, st, err := c.isendEngine(opIsend, buf, dest, tag, engine.Standard)
	r, err := c.request(opIsend, er, s, st, err)
	if r != nil && r.er == nil && r.sent.Valid() {
		r.hot = hotSent
	}
	return r, err
}

// isendPending is Isend's usual case when the message did not go out at
// once: it wraps the engine request IsendNow started (or reports why it
// started none).
func (c *Comm) isendPending(er *engine.Request, err error) (*Request, error) {
	if err != nil {
		return nil, c.fail(c.engineErr(opIsend.String(), err))
	}
	r := c.p.requestFor(er)
	*r = Request{c: c, er: er, op: opIsend, hot: hotEngine}
	return r, nil
}

// Issend starts a synchronous send (MPI_ISSEND): the request completes
// once the matching receive has started.
func (c *Comm) Issend(buf []byte, dest, tag int) (*Request, error) {
	return c.isendModeEntry(OpIssend, buf, dest, tag)
}

// isendModeEntry is the entry of Issend, Irsend and Ibsend: through the
// interceptors, if any, else to pIsendMode.
func (c *Comm) isendModeEntry(op Op, buf []byte, dest, tag int) (*Request, error) {
	if intercepted() {
		return peerCall(op, c, buf, dest, tag).runRequest()
	}
	return c.pIsendMode(op, buf, dest, tag)
}

// pIsendMode starts the nonblocking send op (Issend, Irsend, Ibsend)
// without interception.
func (c *Comm) pIsendMode(op Op, buf []byte, dest, tag int) (*Request, error) {
	rop := requestOp(op)
	er, s, st, err := c.isendEngine(rop, buf, dest, tag, sendMode(op))
	return c.request(rop, er, s, st, err)
}

// Irsend starts a ready send (MPI_IRSEND).
func (c *Comm) Irsend(buf []byte, dest, tag int) (*Request, error) {
	return c.isendModeEntry(OpIrsend, buf, dest, tag)
}

// Ibsend starts a buffered send (MPI_IBSEND): buf is copied into the
// attached buffer at once.
func (c *Comm) Ibsend(buf []byte, dest, tag int) (*Request, error) {
	return c.isendModeEntry(OpIbsend, buf, dest, tag)
}

// Irecv starts a receive (MPI_IRECV); buf must not be read until the
// request completes.
func (c *Comm) Irecv(buf []byte, source, tag int) (*Request, error) {
	return irecvEntry(c, buf, source, tag)
}

// irecvTooled is Irecv through the interceptors.
func (c *Comm) irecvTooled(buf []byte, source, tag int) (*Request, error) {
	return peerCall(OpIrecv, c, buf, source, tag).runRequest()
}

// pIrecv is Irecv without interception (PMPI_Irecv).
//
// Out of line: put in line in a caller, as a profile may have it, its call
// of the engine's Irecv would be a call inside a call put in line, which
// the profile does not find (golang/go#69046), and stay a call; one call
// either way, and this way the engine's receive is in line in it.
//
//go:noinline
func (c *Comm) pIrecv(buf []byte, source, tag int) (*Request, error) {
	if c.usual(source, tag) { // checked in line: no wildcard, no ProcNull
		er, err := c.p.ep.Irecv(buf, c.worldOf(source), tag, c.ctx)
		if err != nil {
			return nil, c.fail(c.engineErr("Irecv", err))
		}
		if r, _ := er.Owner().(*Request); r != nil && r.spare {
			// The slot's request (spareOf), clean but for these: set
			// without zeroing.
			r.c, r.er, r.op, r.inactive, r.hot, r.spare = c, er, opIrecv, false, hotEngine, false
			return r, nil
		}
		r := c.p.requestFor(er)
		*r = Request{} // set whole, without building it aside
		r.c, r.er, r.op, r.hot = c, er, opIrecv, hotEngine
		return r, nil
	}
	er, st, err := c.irecvEngine(buf, source, tag)
	return c.request(opIrecv, er, engine.Sent{}, st, err)
}

// irecvEngine is the nonblocking receive's checks and engine call, for
// Irecv past its usual case, IrecvLayout and Start. It starts a receive:
// the engine request, or, from ProcNull, no
// request and the status of a receive complete at once.
func (c *Comm) irecvEngine(buf []byte, source, tag int) (*engine.Request, Status, error) {
	const op = "Irecv"
	src, null, err := c.recvArgs(op, source, tag)
	if err != nil {
		return nil, Status{}, err
	}
	if null {
		return nil, procNullStatus, nil
	}
	er, err := c.p.ep.Irecv(buf, src, tag, c.ctx)
	if err != nil {
		return nil, Status{}, c.fail(c.engineErr(op, err))
	}
	return er, Status{}, nil
}

// Sendrecv sends sendbuf to dest and receives into recvbuf from source,
// as if at once, so that two ranks exchanging never deadlock
// (MPI_SENDRECV).
func (c *Comm) Sendrecv(sendbuf []byte, dest, sendtag int, recvbuf []byte, source, recvtag int) (Status, error) {
	if intercepted() {
		call := peerCall(OpSendrecv, c, sendbuf, dest, sendtag)
		call.buf2, call.RecvPeer, call.RecvTag = recvbuf, source, recvtag
		return call.runStatus()
	}
	return c.pSendrecv(sendbuf, dest, sendtag, recvbuf, source, recvtag)
}

// pSendrecv is Sendrecv without interception (PMPI_Sendrecv).
func (c *Comm) pSendrecv(sendbuf []byte, dest, sendtag int, recvbuf []byte, source, recvtag int) (Status, error) {
	const op = "Sendrecv"
	if err := c.check(op); err != nil {
		return Status{}, err
	}
	if err := c.checkDest(op, dest, sendtag); err != nil {
		return Status{}, c.fail(err)
	}
	if err := c.checkSource(op, source, recvtag); err != nil {
		return Status{}, c.fail(err)
	}
	r, err := c.pIrecv(recvbuf, source, recvtag)
	if err != nil {
		return Status{}, err
	}
	if err := c.pSend(sendbuf, dest, sendtag); err != nil {
		r.pCancel()
		r.pWait()
		return Status{}, err
	}
	return r.pWait()
}

// SendrecvReplace is Sendrecv with one buffer: buf is sent, then replaced
// by the message received (MPI_SENDRECV_REPLACE).
func (c *Comm) SendrecvReplace(buf []byte, dest, sendtag, source, recvtag int) (Status, error) {
	if intercepted() {
		call := peerCall(OpSendrecvReplace, c, buf, dest, sendtag)
		call.RecvPeer, call.RecvTag = source, recvtag
		return call.runStatus()
	}
	return c.pSendrecvReplace(buf, dest, sendtag, source, recvtag)
}

// pSendrecvReplace is SendrecvReplace without interception.
func (c *Comm) pSendrecvReplace(buf []byte, dest, sendtag, source, recvtag int) (Status, error) {
	out := append([]byte(nil), buf...)
	return c.pSendrecv(out, dest, sendtag, buf, source, recvtag)
}

// Iprobe reports whether a message from source with tag can be received
// now, and its status, without receiving it (MPI_IPROBE).
func (c *Comm) Iprobe(source, tag int) (Status, bool, error) {
	if intercepted() {
		r, err := peerCall(OpIprobe, c, nil, source, tag).runResult()
		return r.Status, r.Flag, err
	}
	return c.pIprobe(source, tag)
}

// pIprobe is Iprobe without interception.
func (c *Comm) pIprobe(source, tag int) (Status, bool, error) {
	const op = "Iprobe"
	src, null, err := c.recvArgs(op, source, tag)
	if err != nil {
		return Status{}, false, err
	}
	if null {
		return procNullStatus, true, nil
	}
	st, ok, err := c.p.ep.Iprobe(src, tag, c.ctx)
	if err != nil {
		return Status{}, false, c.fail(c.engineErr(op, err))
	}
	if !ok {
		return Status{}, false, nil
	}
	return c.status(st), true, nil
}

// Probe waits until a message from source with tag can be received and
// returns its status (MPI_PROBE).
func (c *Comm) Probe(source, tag int) (Status, error) {
	if intercepted() {
		return peerCall(OpProbe, c, nil, source, tag).runStatus()
	}
	return c.pProbe(source, tag)
}

// pProbe is Probe without interception.
func (c *Comm) pProbe(source, tag int) (Status, error) {
	const op = "Probe"
	src, null, err := c.recvArgs(op, source, tag)
	if err != nil {
		return Status{}, err
	}
	if null {
		return procNullStatus, nil
	}
	st, err := c.p.ep.Probe(src, tag, c.ctx)
	if err != nil {
		return Status{}, c.fail(c.engineErr(op, err))
	}
	return c.status(st), nil
}
