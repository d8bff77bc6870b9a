package mpi

import (
	"context"
	"sync/atomic"

	"github.com/tachyon-hpc/tachyon/engine"
)

// Matched probe (MPI-4.1 section 3.8.2-3.8.3): Mprobe and Improbe find a
// message as Probe and Iprobe do, and take it: no other receive or probe
// can match it any more, only a receive of the Message they return. It is
// MPI's answer to Probe then Recv at ThreadMultiple, where another
// goroutine's receive may take the message probed between the two calls
// and the Recv then gets another message, of another size, or waits.
//
//	m, st, err := c.Mprobe(AnySource, tag)
//	buf := make([]byte, st.Count)
//	_, err = m.Recv(buf) // this message, whatever other goroutines receive

// Message is a message a matched probe took (MPI_Message). It is
// received once, by Recv or Irecv; a second receive, or one of a nil
// Message, fails with ErrRequest (MPI-4.1 has no class of its own for an
// invalid message handle; Open MPI and MPICH answer a receive of
// MPI_MESSAGE_NULL, what a received message becomes, with
// MPI_ERR_REQUEST). A message never received is reported by Finalize as
// one no receive took.
type Message struct {
	c      *Comm
	em     engine.Message
	st     Status      // the probe's
	used   atomic.Bool // a receive has claimed it
	noProc bool        // MessageNoProc
}

// MessageNoProc is the Message of a matched probe of ProcNull
// (MPI_MESSAGE_NO_PROC): its receive completes at once with the status of
// a receive from ProcNull (Source ProcNull, Tag AnyTag, Count 0), and,
// unlike another Message, it may be received any number of times.
var MessageNoProc = &Message{noProc: true}

// Mprobe waits until a message from source (or AnySource) with tag (or
// AnyTag) can be received, takes it, and returns it with its status
// (MPI_MPROBE). From ProcNull it returns MessageNoProc at once.
func (c *Comm) Mprobe(source, tag int) (*Message, Status, error) {
	if intercepted() {
		r, err := peerCall(OpMprobe, c, nil, source, tag).runResult()
		return r.Message, r.Status, err
	}
	return c.pMprobe(source, tag)
}

// pMprobe is Mprobe without interception.
func (c *Comm) pMprobe(source, tag int) (*Message, Status, error) {
	return c.mprobeEngine("Mprobe", context.Background(), source, tag)
}

// MprobeContext is Mprobe bounded by ctx: if ctx ends before a message is
// found it returns an ErrCanceled error (which errors.Is also matches to
// ctx's error) and has taken no message: the next probe or receive finds
// it. Interceptors see it as OpMprobe with Call.Ctx set.
func (c *Comm) MprobeContext(ctx context.Context, source, tag int) (*Message, Status, error) {
	if ctx == nil {
		return nil, Status{}, c.fail(nilContext("MprobeContext"))
	}
	if intercepted() {
		call := peerCall(OpMprobe, c, nil, source, tag)
		call.Ctx = ctx
		r, err := call.runResult()
		return r.Message, r.Status, err
	}
	return c.mprobeEngine("MprobeContext", ctx, source, tag)
}

// mprobeEngine is the checks and engine call of Mprobe and MprobeContext,
// for routine op.
func (c *Comm) mprobeEngine(op string, ctx context.Context, source, tag int) (*Message, Status, error) {
	src, null, err := c.recvArgs(op, source, tag)
	if err != nil {
		return nil, Status{}, err
	}
	if null {
		return MessageNoProc, procNullStatus, nil
	}
	em, est, err := c.p.ep.MprobeContext(ctx, src, tag, c.ctx)
	if err != nil {
		return nil, Status{}, c.fail(contextErr(op, c, ctx, err))
	}
	st := c.status(est)
	return &Message{c: c, em: em, st: st}, st, nil
}

// Improbe takes a message from source (or AnySource) with tag (or AnyTag)
// if one can be received now, and returns it with its status and true
// (MPI_IMPROBE); else nil and false. From ProcNull it returns
// MessageNoProc and true.
func (c *Comm) Improbe(source, tag int) (*Message, Status, bool, error) {
	if intercepted() {
		r, err := peerCall(OpImprobe, c, nil, source, tag).runResult()
		return r.Message, r.Status, r.Flag, err
	}
	return c.pImprobe(source, tag)
}

// pImprobe is Improbe without interception.
func (c *Comm) pImprobe(source, tag int) (*Message, Status, bool, error) {
	const op = "Improbe"
	src, null, err := c.recvArgs(op, source, tag)
	if err != nil {
		return nil, Status{}, false, err
	}
	if null {
		return MessageNoProc, procNullStatus, true, nil
	}
	em, est, ok, err := c.p.ep.Improbe(src, tag, c.ctx)
	if err != nil {
		return nil, Status{}, false, c.fail(c.engineErr(op, err))
	}
	if !ok {
		return nil, Status{}, false, nil
	}
	st := c.status(est)
	return &Message{c: c, em: em, st: st}, st, true, nil
}

// Recv receives m into buf (MPI_MRECV) and returns its status. A message
// longer than buf fills it and returns ErrTruncate; Status.Count says how
// much was stored, as for Comm.Recv.
func (m *Message) Recv(buf []byte) (Status, error) {
	if intercepted() {
		return messageCall(OpMrecv, m, buf).runStatus()
	}
	return m.pRecv(buf)
}

// pRecv is Recv without interception.
func (m *Message) pRecv(buf []byte) (Status, error) {
	const op = "Mrecv"
	if err := m.claim(op); err != nil || m.noProc {
		return procNullStatus, err
	}
	c := m.c
	st, err := c.p.ep.Mrecv(m.em, buf)
	return c.status(st), c.fail(c.engineErr(op, err))
}

// Irecv starts the receive of m into buf (MPI_IMRECV); buf must not be
// read until the request completes. The request completes as Recv's
// would.
func (m *Message) Irecv(buf []byte) (*Request, error) {
	if intercepted() {
		return messageCall(OpImrecv, m, buf).runRequest()
	}
	return m.pIrecv(buf)
}

// pIrecv is Irecv without interception.
func (m *Message) pIrecv(buf []byte) (*Request, error) {
	const op = "Imrecv"
	if err := m.claim(op); err != nil {
		return nil, err
	}
	if m.noProc {
		return doneRequest(nil, procNullStatus), nil
	}
	c := m.c
	er, err := c.p.ep.Imrecv(m.em, buf)
	if err != nil {
		return nil, c.fail(c.engineErr(op, err))
	}
	return c.request(opImrecv, er, engine.Sent{}, Status{}, nil)
}

// claim takes m for a receive: an error if m is nil or already received.
// MessageNoProc is never used up.
func (m *Message) claim(op string) error {
	switch {
	case m == nil:
		return noComm(errorf(ErrRequest, op, "nil Message"))
	case m.noProc:
		return nil
	case !m.used.CompareAndSwap(false, true):
		return m.c.fail(errorf(ErrRequest, op, "the message (from rank %d, tag %d, %d bytes) was already received", m.st.Source, m.st.Tag, m.st.Count))
	}
	return nil
}

// messageCall returns the Call of op receiving m into buf: Peer and Tag
// are the message's.
func messageCall(op Op, m *Message, buf []byte) *Call {
	var comm *Comm
	peer, tag := Undefined, Undefined
	if m != nil {
		comm = m.c
		peer, tag = m.st.Source, m.st.Tag
		if m.noProc {
			peer, tag = ProcNull, AnyTag
		}
	}
	c := peerCall(op, comm, buf, peer, tag)
	c.Message = m
	return c
}
