package mpi

import (
	"context"
	"math"
	"sync"

	"github.com/tachyon-hpc/tachyon/engine"
	"github.com/tachyon-hpc/tachyon/progress"
)

// Request is a nonblocking operation: a send, a receive, a timer, or a
// persistent operation (MPI_Request). Once Wait or Test has reported it
// complete it is inactive: waiting on it again returns at once with an
// empty status, as for MPI_REQUEST_NULL. After Free every use returns
// ErrRequest.
type Request struct {
	c        *Comm
	er       *engine.Request // a communication in flight
	sent     engine.Sent     // or a short send that completed at once (kept for a cancel)
	x        *requestExtra   // timers, persistent requests, requests complete from the start
	op       opcode          // the routine that made it, for errors
	inactive bool
	hot      hotKind // op, inactive, hot and spare side by side: set together, in one store
	spare    bool    // given back by WaitallInto and kept by its engine request's slot (proc.requestFor)
	freed    bool
}

// hotKind marks the request of an Isend or Irecv that took the usual
// path and that nothing has touched since: plain (Request.plain), with
// the kind of operation it holds, so that collectPlain tells the case it
// collects with one compare instead of five. It is only ever set where
// those requests are made, and cleared wherever a request stops being
// plain or changes what it holds (collect, which Wait, Test and
// Waitall come to, Cancel, Free and WaitallInto's own loop); its zero
// value, what every other request has, sends a request down the general
// path.
type hotKind uint8

const (
	notHot    hotKind = iota
	hotSent           // a send that left at once: sent is valid, er nil
	hotEngine         // an engine request in flight: er set
)

// requestExtra holds what only some requests need, so that the request
// of an Isend or Irecv, allocated per operation unless WaitallInto gave
// one back, stays small.
type requestExtra struct {
	tr      *progress.TimerRequest // a timer, on engine eng
	eng     *progress.Engine
	st      Status // the status of a request complete from the start
	persist *persistent
	scatter *layoutRecv // IrecvLayout's: unpacked into the user's buffer on completion
	coll    *sched      // a nonblocking or persistent collective's schedule (collnb.go)
}

// opcode names the routine that made a request, for its errors.
type opcode uint8

const (
	opIsend opcode = iota
	opIssend
	opIrsend
	opIbsend
	opIrecv
	opSendInit
	opSsendInit
	opBsendInit
	opRsendInit
	opRecvInit
	opTimerCreate
	opImrecv
	opColl // a nonblocking or persistent collective
)

var opNames = [...]string{"Isend", "Issend", "Irsend", "Ibsend", "Irecv",
	"SendInit", "SsendInit", "BsendInit", "RsendInit", "RecvInit", "TimerCreate", "Imrecv", "collective"}

func (o opcode) String() string { return opNames[o] }

// persistent holds the arguments of SendInit and RecvInit.
type persistent struct {
	buf    []byte
	peer   int
	tag    int
	mode   engine.Mode
	recv   bool
	active bool
	coll   *sched // a persistent collective's
}

func doneRequest(c *Comm, st Status) *Request {
	return &Request{c: c, x: &requestExtra{st: st}}
}

// completion returns what a waiter watches and the engine that drives
// it; nil if the request needs no waiting.
func (r *Request) completion() (*progress.Completion, *progress.Engine) {
	switch {
	case r.er != nil:
		return &r.er.Completion, r.c.p.ep.Progress()
	case r.x != nil && r.x.tr != nil:
		return &r.x.tr.Completion, r.x.eng
	case r.x != nil && r.x.coll != nil:
		return &r.x.coll.done, r.c.p.ep.Progress()
	}
	return nil, nil
}

// persistent reports whether r is a persistent request.
func (r *Request) persistent() bool { return r.x != nil && r.x.persist != nil }

// active reports whether r has an operation not yet reported complete.
func (r *Request) active() bool { return r != nil && !r.freed && !r.inactive }

// finish collects the result of a complete request and makes it
// inactive.
func (r *Request) finish() (Status, error) {
	var st Status
	var err error
	switch {
	case r.er != nil || r.sent.Valid():
		st, err = r.collect(true)
	case r.x != nil && r.x.tr != nil:
		st = Status{Source: AnySource, Tag: AnyTag, Cancelled: r.x.tr.Cancelled()}
		r.x.tr.Free()
		r.x.tr = nil
	case r.x != nil && r.x.coll != nil:
		st, err = emptyStatus, r.finishColl()
	case r.x != nil:
		st = r.x.st
	}
	r.inactive = true
	if r.x != nil && r.x.persist != nil {
		r.x.persist.active = false
	}
	return st, err
}

// collect takes the result of a send or receive: its engine request's,
// given back, or that of a send that went out at once. Without
// wantStatus the status is left empty (MPI_STATUS_IGNORE).
func (r *Request) collect(wantStatus bool) (st Status, err error) {
	r.hot = notHot
	if er := r.er; er != nil {
		r.er = nil
		est, eerr := er.Wait()
		if eerr != nil {
			err = r.c.fail(r.c.engineErr(r.op.String(), eerr))
		}
		if r.x != nil && r.x.scatter != nil {
			err = r.scatter(est, err)
		}
		if wantStatus {
			st = r.c.status(est)
		}
		return st, err
	}
	r.sent = engine.Sent{}
	if wantStatus {
		st = r.c.status(engine.Status{})
	}
	return st, nil
}

// scatter unpacks what IrecvLayout's request received into the user's
// buffer, a truncated message's part included, and returns the request's
// error (or unpacking's).
func (r *Request) scatter(est engine.Status, err error) error {
	s := r.x.scatter
	r.x.scatter = nil
	if est.Cancelled || err != nil && ErrorClass(err) != ErrTruncate {
		return err
	}
	if _, uerr := s.l.unpack(s.buf, s.packed[:min(est.Count, len(s.packed))]); uerr != nil && err == nil {
		return r.c.fail(uerr)
	}
	return err
}

// plain reports whether r is the usual request, a send or receive that
// Isend or Irecv started and no one has waited for: Wait and Waitall
// collect it in line.
func (r *Request) plain() bool {
	return r.x == nil && !r.freed && !r.inactive && r.c != nil && !r.c.p.ended() &&
		(r.er != nil || r.sent.Valid())
}

func (r *Request) usable(op string) error {
	if r != nil && r.freed {
		return r.fail(errorf(ErrRequest, op, "request was freed"))
	}
	if r != nil && r.c != nil && r.c.p.ended() {
		return r.fail(r.c.p.endError(op))
	}
	return nil
}

// usableNonNil is usable for a routine that takes no nil request.
func (r *Request) usableNonNil(op string) error {
	if r == nil {
		return noComm(errorf(ErrRequest, op, "nil request"))
	}
	return r.usable(op)
}

// fail applies the error handler of r's communicator to err, or the
// process's Self's for a request of none (a timer, a nil request).
func (r *Request) fail(err error) error {
	if r != nil && r.c != nil {
		return r.c.fail(err)
	}
	return noComm(err)
}

// Wait waits for r to complete and returns its status (MPI_WAIT). A nil or
// inactive request returns an empty status at once.
func (r *Request) Wait() (Status, error) {
	return waitEntry(r)
}

// waitTooled is Wait through the interceptors.
func (r *Request) waitTooled() (Status, error) {
	return requestCall(OpWait, r).runStatus()
}

// pWait is Wait without interception (PMPI_Wait).
func (r *Request) pWait() (Status, error) {
	if r != nil && r.plain() {
		r.inactive = true
		return r.collect(true)
	}
	if err := r.usable("Wait"); err != nil {
		return Status{}, err
	}
	if !r.active() {
		return emptyStatus, nil
	}
	if r.er == nil { // an engine request's own Wait, in finish, waits for it
		if c, e := r.completion(); c != nil {
			e.Wait(c)
		}
	}
	return r.finish()
}

// Test reports whether r has completed, with its status if so, driving
// progress once if not (MPI_TEST). A nil or inactive request reports
// true with an empty status.
func (r *Request) Test() (Status, bool, error) {
	if intercepted() {
		res, err := requestCall(OpTest, r).runResult()
		return res.Status, res.Flag, err
	}
	return r.pTest()
}

// pTest is Test without interception.
func (r *Request) pTest() (Status, bool, error) {
	if err := r.usable("Test"); err != nil {
		return Status{}, false, err
	}
	if !r.active() {
		return emptyStatus, true, nil
	}
	if c, e := r.completion(); c != nil && !e.Test(c) {
		return Status{}, false, nil
	}
	st, err := r.finish()
	return st, true, err
}

// Cancel asks to withdraw r (MPI_CANCEL): a receive not yet matched, a
// send its receiver has not matched, or a timer. r must still be waited
// for, and then Status.Cancelled says whether the cancel took effect.
func (r *Request) Cancel() error {
	if intercepted() {
		return requestCall(OpCancel, r).run()
	}
	return r.pCancel()
}

// pCancel is Cancel without interception.
func (r *Request) pCancel() error {
	if err := r.usableNonNil("Cancel"); err != nil {
		return err
	}
	if r.x != nil && r.x.coll != nil {
		return r.fail(errorf(ErrRequest, "Cancel", "a collective's request cannot be cancelled"))
	}
	switch {
	case r.er != nil:
		return r.c.fail(r.c.engineErr("Cancel", r.er.Cancel()))
	case r.sent.Valid():
		er, err := r.c.p.ep.CancelSent(r.sent)
		if err != nil {
			return r.c.fail(r.c.engineErr("Cancel", err))
		}
		r.er, r.sent, r.hot = er, engine.Sent{}, notHot
	case r.x != nil && r.x.tr != nil:
		r.x.tr.Cancel()
	}
	return nil
}

// Free releases r (MPI_REQUEST_FREE). An operation still in flight goes
// on and completes unobserved.
func (r *Request) Free() error {
	if intercepted() {
		return requestCall(OpRequestFree, r).run()
	}
	return r.pFree()
}

// pFree is Free without interception.
func (r *Request) pFree() error {
	if err := r.usableNonNil("Free"); err != nil {
		return err
	}
	if r.x != nil && r.x.coll != nil && r.active() {
		return r.fail(errorf(ErrRequest, "Free", "an active collective's request cannot be freed: wait for it first"))
	}
	switch {
	case r.er != nil:
		r.er.Free()
		r.er = nil
	case r.sent.Valid():
		r.sent = engine.Sent{}
	case r.x != nil && r.x.tr != nil:
		r.x.tr.Free()
		r.x.tr = nil
	}
	r.freed, r.hot = true, notHot
	return nil
}

// ResetTimer moves an active timer request's due time to dueTime seconds
// from now, earlier or later (MPI_TIMER_RESET). It returns ErrRequest for
// a request that is not an active timer, ErrArg for a due time that is
// NaN or infinite.
func (r *Request) ResetTimer(dueTime float64) error {
	if intercepted() {
		call := requestCall(OpResetTimer, r)
		call.Due = dueTime
		return call.run()
	}
	return r.pResetTimer(dueTime)
}

// pResetTimer is ResetTimer without interception.
func (r *Request) pResetTimer(dueTime float64) error {
	if err := r.usable("ResetTimer"); err != nil {
		return err
	}
	if r == nil || r.x == nil || r.x.tr == nil || !r.active() {
		return r.fail(errorf(ErrRequest, "ResetTimer", "not an active timer request"))
	}
	if math.IsNaN(dueTime) || math.IsInf(dueTime, 0) {
		return r.fail(errorf(ErrArg, "ResetTimer", "due time %v is not a finite number of seconds", dueTime))
	}
	if err := r.x.tr.Reset(dueTime); err != nil {
		return r.fail(&Error{Class: ErrRequest, Op: "ResetTimer", Detail: "timer has completed or was cancelled", Err: err})
	}
	return nil
}

// Timer requests made outside any rank's environment (under Run, or with
// no Init) run on a progress engine of their own.
var timerEngine struct {
	once sync.Once
	e    *progress.Engine
	err  error
}

// TimerCreate returns a request that completes no earlier than
// Wtime()+dueTime (MPI_TIMER_CREATE); a due time of zero or less gives a
// completed request. It can be waited on with communication requests, and
// cancelled, freed and reset like them.
//
// Unlike the other routines it works before Init, and so in the ranks of
// Run, which have no Init: the timer then runs on a progress engine of
// its own, as a clock needs no job. After Finalize it fails with
// ErrNotInitialized.
func TimerCreate(dueTime float64) (*Request, error) {
	if intercepted() {
		call := newCall(OpTimerCreate, nil)
		call.Due = dueTime
		if p := current(); p != nil {
			call.Rank = p.ep.Rank()
		}
		return call.runRequest()
	}
	return pTimerCreate(dueTime)
}

// pTimerCreate is TimerCreate without interception.
func pTimerCreate(dueTime float64) (*Request, error) {
	if env.state.Load() == stateDone {
		return nil, errorf(ErrNotInitialized, "TimerCreate", "MPI was finalized") // no Self to handle it
	}
	if math.IsNaN(dueTime) || math.IsInf(dueTime, 0) {
		return nil, noComm(errorf(ErrArg, "TimerCreate", "due time %v is not a finite number of seconds", dueTime))
	}
	var e *progress.Engine
	if p := current(); p != nil {
		e = p.ep.Progress()
	} else {
		timerEngine.once.Do(func() { timerEngine.e, timerEngine.err = progress.New() })
		if timerEngine.err != nil {
			return nil, &Error{Class: ErrOther, Op: "TimerCreate", Detail: "starting the timer engine", Err: timerEngine.err}
		}
		e = timerEngine.e
	}
	tr, err := e.NewTimer(dueTime)
	if err != nil {
		return nil, &Error{Class: ErrOther, Op: "TimerCreate", Detail: "arming the timer", Err: err}
	}
	return &Request{x: &requestExtra{tr: tr, eng: e}, op: opTimerCreate}, nil
}

// Waitall waits for every request of reqs (MPI_WAITALL). Nil entries are
// MPI_REQUEST_NULL; completed entries are set to nil, except persistent
// requests, which stay and become inactive. The error is the first any
// request reported; statuses[i] holds each request's status.
func Waitall(reqs []*Request) ([]Status, error) {
	if intercepted() {
		res, err := requestsCall(OpWaitall, reqs).runOn(reqs, nil)
		return res.Statuses, err
	}
	return pWaitall(reqs)
}

// pWaitall is Waitall without interception.
func pWaitall(reqs []*Request) ([]Status, error) {
	sts := make([]Status, len(reqs))
	return sts, waitall(reqs, sts, false)
}

// WaitallInto is Waitall that stores the statuses in statuses, which must
// have an entry per request, or drops them if statuses is nil
// (MPI_STATUSES_IGNORE). It allocates nothing, and the requests it sets to
// nil go back to their rank for later Isend and Irecv calls: windows of
// nonblocking operations in a loop produce no garbage. As MPI sets the
// handles to MPI_REQUEST_NULL, other copies of those *Request values must
// not be used afterwards (with Waitall they stay valid and inactive).
func WaitallInto(reqs []*Request, statuses []Status) error {
	// No entry of a function variable, as the message path's other
	// routines have: a slice passed through one escapes to the heap, and
	// a window of requests in a local array would be allocated each time.
	if intercepted() {
		return waitallIntoTooled(reqs, statuses)
	}
	return pWaitallInto(reqs, statuses)
}

// waitallIntoTooled is WaitallInto through the interceptors.
func waitallIntoTooled(reqs []*Request, statuses []Status) error {
	c := requestsCall(OpWaitall, reqs)
	c.into = true
	if statuses != nil {
		c.stBuf = append(c.stBuf[:0], statuses...)
		c.statuses = c.stBuf
	}
	_, err := c.runOn(reqs, statuses)
	return err
}

// pWaitallInto is WaitallInto without interception.
func pWaitallInto(reqs []*Request, statuses []Status) error {
	if statuses != nil {
		return waitall(reqs, statuses, true)
	}
	// Without statuses, the usual case of a window (a plain request below
	// ThreadMultiple, complete without error) in a loop of its own that
	// makes no call (collectPlain); any other request the general loop's
	// work for it without the status, or the general loop itself: alone
	// for a request that is not plain, for all the rest at ThreadMultiple.
	var first error
	for i := collectPlain(reqs, 0); i < len(reqs); i = collectPlain(reqs, i+1) {
		r := reqs[i]
		if !r.plain() {
			if err := waitall(reqs[i:i+1], nil, true); err != nil && first == nil {
				first = err
			}
			continue
		}
		if r.c.p.thread >= ThreadMultiple {
			if err := waitall(reqs[i:], nil, true); err != nil && first == nil {
				first = err
			}
			return first
		}
		r.inactive, r.hot = true, notHot
		reqs[i] = nil
		if er := r.er; er != nil {
			r.er = nil
			if eerr := er.WaitErr(); eerr != nil {
				if err := r.c.fail(r.c.engineErr(r.op.String(), eerr)); first == nil {
					first = err
				}
			}
			r.spare = true // its slot's next operation takes it back
		} else { // a send that left at once (engine.Sent)
			r.sent = engine.Sent{}
			r.c.p.giveBack(r)
		}
	}
	return first
}

// collectPlain is WaitallInto's usual case: from reqs[i] on, it collects
// each plain request below ThreadMultiple that completed without error,
// as the general loop would, and skips nil entries, up to the first
// request it cannot collect so; it returns that request's index, or
// len(reqs). It makes no call, so that the values of its loop stay in
// registers: with the calls of the other cases in the same loop the
// compiler kept three of them on the stack, stored on every request. Out
// of line for the same reason: inlined in WaitallInto (as a profile may
// have it), its loop would be among those calls again. A copy that earns
// its place: docs/engine.md, "Fast paths", counts what it saves.
//
//go:noinline
func collectPlain(reqs []*Request, i int) int {
	var ok *Comm // the communicator of the last request collected: its rank's checks passed
	if uint(i) > uint(len(reqs)) {
		return i
	}
	rs := reqs[i:] // indexed by j below without a check of its own
	for j, r := range rs {
		if r == nil {
			continue
		}
		// plain (r.hot), with the rank's checks made once a communicator.
		h := r.hot
		if h == notHot {
			return i + j
		}
		if c := r.c; c != ok {
			if c.p.ended() || c.p.thread >= ThreadMultiple {
				return i + j
			}
			ok = c
		}
		// Each case's pointer stores side by side, for one check of the
		// write barrier.
		if h == hotEngine {
			if !r.er.Collect() {
				return i + j
			}
			r.inactive, r.hot, r.spare = true, notHot, true // spare: its slot's next operation takes it back
			r.er, rs[j] = nil, nil
		} else { // a send that left at once (engine.Sent)
			p := ok.p
			n := p.nFree
			if uint(n) >= maxFreeRequests {
				return i + j // giveBack would drop r
			}
			r.sent = engine.Sent{}
			r.inactive, r.hot = true, notHot
			p.nFree = n + 1
			p.reqFree[n], rs[j] = r, nil
		}
	}
	return len(reqs)
}

// waitall is Waitall and WaitallInto; recycle gives completed requests
// back to their rank.
func waitall(reqs []*Request, statuses []Status, recycle bool) error {
	if statuses != nil && len(statuses) != len(reqs) {
		return noComm(errorf(ErrArg, "Waitall", "%d statuses for %d requests", len(statuses), len(reqs)))
	}
	var first error
	var done recycler
	for i, r := range reqs {
		if r == nil {
			if statuses != nil {
				statuses[i] = emptyStatus
			}
			continue
		}
		var st Status
		var err error
		slot := false // r is kept by its engine request's slot
		if r.plain() {
			r.inactive = true
			slot = r.er != nil
			st, err = r.collect(statuses != nil)
		} else {
			st, err = r.pWait()
		}
		if statuses != nil {
			statuses[i] = st
		}
		if err != nil && first == nil {
			first = err
		}
		if !r.freed && !r.persistent() {
			reqs[i] = nil
			if recycle && r.c != nil && r.x == nil {
				switch p := r.c.p; {
				case p.thread >= ThreadMultiple:
					done.add(r)
				case slot:
					r.spare = true // its slot's next operation takes it back
				default:
					p.giveBack(r)
				}
			}
		}
	}
	done.flush()
	return first
}

// recycler gathers the requests a Waitall frees and gives them back to
// their rank in batches.
type recycler struct {
	p  *proc
	n  int
	rs [32]*Request
}

func (b *recycler) add(r *Request) {
	if b.n == len(b.rs) || b.p != r.c.p {
		b.flush()
		b.p = r.c.p
	}
	b.rs[b.n] = r
	b.n++
}

func (b *recycler) flush() {
	if b.n > 0 {
		b.p.recycle(b.rs[:b.n])
		b.n = 0
	}
}

// Testall reports whether every request of reqs has completed
// (MPI_TESTALL); only then does it collect them, as Waitall.
func Testall(reqs []*Request) ([]Status, bool, error) {
	if intercepted() {
		res, err := requestsCall(OpTestall, reqs).runOn(reqs, nil)
		return res.Statuses, res.Flag, err
	}
	return pTestall(reqs)
}

// pTestall is Testall without interception.
func pTestall(reqs []*Request) ([]Status, bool, error) {
	for _, r := range reqs {
		if err := r.usable("Testall"); err != nil {
			return nil, false, err
		}
	}
	var polled *progress.Engine // requests of one rank share one engine
	for _, r := range reqs {
		if c, e := r.completionIfActive(); c != nil && !c.Done() {
			if e != polled {
				polled = e
				e.Progress()
			}
			if !c.Done() {
				return nil, false, nil
			}
		}
	}
	sts, err := pWaitall(reqs)
	return sts, true, err
}

func (r *Request) completionIfActive() (*progress.Completion, *progress.Engine) {
	if !r.active() {
		return nil, nil
	}
	return r.completion()
}

// ready returns the index of an active request of reqs that needs no more
// waiting, -1 if none, and whether any request is active at all.
func ready(reqs []*Request) (int, bool) {
	any := false
	for i, r := range reqs {
		if !r.active() {
			continue
		}
		any = true
		if c, _ := r.completion(); c == nil || c.Done() {
			return i, true
		}
	}
	return -1, any
}

// take collects request i of reqs, niling the entry as Waitall does.
func take(reqs []*Request, i int) (Status, error) {
	r := reqs[i]
	st, err := r.finish()
	if !r.persistent() {
		reqs[i] = nil
	}
	return st, err
}

// Waitany waits until one request of reqs completes and returns its
// index and status (MPI_WAITANY); the entry is set to nil. With no active
// request it returns Undefined and an empty status at once.
func Waitany(reqs []*Request) (int, Status, error) {
	if intercepted() {
		res, err := requestsCall(OpWaitany, reqs).runOn(reqs, nil)
		return res.Index, res.Status, err
	}
	return pWaitany(reqs)
}

// pWaitany is Waitany without interception.
func pWaitany(reqs []*Request) (int, Status, error) {
	for _, r := range reqs {
		if err := r.usable("Waitany"); err != nil {
			return Undefined, Status{}, err
		}
	}
	i := waitAny(reqs)
	if i < 0 {
		return Undefined, emptyStatus, nil
	}
	st, err := take(reqs, i)
	return i, st, err
}

// Testany is Waitany that does not wait (MPI_TESTANY): it reports false
// if no active request has completed, and true with index Undefined if no
// request is active.
func Testany(reqs []*Request) (int, Status, bool, error) {
	if intercepted() {
		res, err := requestsCall(OpTestany, reqs).runOn(reqs, nil)
		return res.Index, res.Status, res.Flag, err
	}
	return pTestany(reqs)
}

// pTestany is Testany without interception.
func pTestany(reqs []*Request) (int, Status, bool, error) {
	for _, r := range reqs {
		if err := r.usable("Testany"); err != nil {
			return Undefined, Status{}, false, err
		}
	}
	i, any := ready(reqs)
	if !any {
		return Undefined, emptyStatus, true, nil
	}
	if i < 0 {
		pollAll(reqs)
		if i, _ = ready(reqs); i < 0 {
			return Undefined, Status{}, false, nil
		}
	}
	st, err := take(reqs, i)
	return i, st, true, err
}

// Waitsome waits until at least one request of reqs completes and
// collects every one that has (MPI_WAITSOME). With no active request it
// returns nil indices.
func Waitsome(reqs []*Request) ([]int, []Status, error) {
	if intercepted() {
		res, err := requestsCall(OpWaitsome, reqs).runOn(reqs, nil)
		return res.Indices, res.Statuses, err
	}
	return pWaitsome(reqs)
}

// pWaitsome is Waitsome without interception.
func pWaitsome(reqs []*Request) ([]int, []Status, error) {
	for _, r := range reqs {
		if err := r.usable("Waitsome"); err != nil {
			return nil, nil, err
		}
	}
	if waitAny(reqs) < 0 {
		return nil, nil, nil
	}
	return collectDone(reqs)
}

// Testsome collects every request of reqs that has completed, possibly
// none (MPI_TESTSOME).
func Testsome(reqs []*Request) ([]int, []Status, error) {
	if intercepted() {
		res, err := requestsCall(OpTestsome, reqs).runOn(reqs, nil)
		return res.Indices, res.Statuses, err
	}
	return pTestsome(reqs)
}

// pTestsome is Testsome without interception.
func pTestsome(reqs []*Request) ([]int, []Status, error) {
	for _, r := range reqs {
		if err := r.usable("Testsome"); err != nil {
			return nil, nil, err
		}
	}
	pollAll(reqs)
	return collectDone(reqs)
}

func collectDone(reqs []*Request) ([]int, []Status, error) {
	var idx []int
	var sts []Status
	var first error
	for i, r := range reqs {
		if !r.active() {
			continue
		}
		if c, _ := r.completion(); c != nil && !c.Done() {
			continue
		}
		st, err := take(reqs, i)
		idx, sts = append(idx, i), append(sts, st)
		if err != nil && first == nil {
			first = err
		}
	}
	return idx, sts, first
}

// pollAll drives once every engine the active requests of reqs depend on.
func pollAll(reqs []*Request) {
	var last *progress.Engine
	for _, r := range reqs {
		if _, e := r.completionIfActive(); e != nil && e != last {
			e.Progress()
			last = e
		}
	}
}

// waitAny waits until an active request of reqs needs no more waiting
// and returns its index, -1 if none is active. Requests of one engine (the
// usual case) wait the engine's way, parking when idle; requests spread
// over several engines (a timer made outside the rank, say) are polled in
// turn (waitAnyContext).
func waitAny(reqs []*Request) int {
	i, _ := waitAnyContext(context.Background(), reqs)
	return i
}
