package mpi

import "github.com/tachyon-hpc/tachyon/engine"

// persistentInit checks the arguments of a persistent request's peer and
// tag and makes the request, inactive until Start.
func (c *Comm) persistentInit(op opcode, p *persistent) (*Request, error) {
	if err := c.check(op.String()); err != nil {
		return nil, err
	}
	check := c.checkDest
	if p.recv {
		check = c.checkSource
	}
	if err := check(op.String(), p.peer, p.tag); err != nil {
		return nil, c.fail(err)
	}
	return &Request{c: c, op: op, inactive: true, x: &requestExtra{persist: p}}, nil
}

// initModeEntry is the entry of the persistent Init op (SendInit ...
// RecvInit): through the interceptors, if any, else to pInitMode.
func (c *Comm) initModeEntry(op Op, buf []byte, peer, tag int) (*Request, error) {
	if intercepted() {
		return peerCall(op, c, buf, peer, tag).runRequest()
	}
	return c.pInitMode(op, buf, peer, tag)
}

// pInitMode makes the persistent request of op, without interception.
func (c *Comm) pInitMode(op Op, buf []byte, peer, tag int) (*Request, error) {
	return c.persistentInit(requestOp(op), &persistent{buf: buf, peer: peer, tag: tag, mode: sendMode(op), recv: op == OpRecvInit})
}

// SendInit makes a persistent send request (MPI_SEND_INIT): each Start
// sends buf to dest with tag as Isend would, and Wait completes that send.
func (c *Comm) SendInit(buf []byte, dest, tag int) (*Request, error) {
	return c.initModeEntry(OpSendInit, buf, dest, tag)
}

// SsendInit is SendInit in synchronous mode (MPI_SSEND_INIT).
func (c *Comm) SsendInit(buf []byte, dest, tag int) (*Request, error) {
	return c.initModeEntry(OpSsendInit, buf, dest, tag)
}

// BsendInit is SendInit in buffered mode (MPI_BSEND_INIT).
func (c *Comm) BsendInit(buf []byte, dest, tag int) (*Request, error) {
	return c.initModeEntry(OpBsendInit, buf, dest, tag)
}

// RsendInit is SendInit in ready mode (MPI_RSEND_INIT).
func (c *Comm) RsendInit(buf []byte, dest, tag int) (*Request, error) {
	return c.initModeEntry(OpRsendInit, buf, dest, tag)
}

// RecvInit makes a persistent receive request (MPI_RECV_INIT).
func (c *Comm) RecvInit(buf []byte, source, tag int) (*Request, error) {
	return c.initModeEntry(OpRecvInit, buf, source, tag)
}

// Start starts the operation of an inactive persistent request
// (MPI_START). Starting one that is active, or one that is not
// persistent, returns ErrRequest.
func (r *Request) Start() error {
	if intercepted() {
		return requestCall(OpStart, r).run()
	}
	return r.pStart()
}

// pStart is Start without interception.
func (r *Request) pStart() error {
	if err := r.usable("Start"); err != nil {
		return err
	}
	if r == nil || !r.persistent() {
		return r.fail(errorf(ErrRequest, "Start", "not a persistent request"))
	}
	pr := r.x.persist
	if pr.active {
		return r.fail(errorf(ErrRequest, "Start", "request is already active"))
	}
	if pr.coll != nil {
		if err := r.c.collectiveLive("Start"); err != nil {
			return r.fail(err)
		}
		r.startColl()
		return nil
	}
	var (
		er  *engine.Request
		s   engine.Sent
		st  Status
		err error
	)
	if pr.recv {
		er, st, err = r.c.irecvEngine(pr.buf, pr.peer, pr.tag)
	} else {
		er, s, st, err = r.c.isendEngine(r.op, pr.buf, pr.peer, pr.tag, pr.mode)
	}
	if err != nil {
		return err
	}
	r.er, r.sent, r.x.st = er, s, st
	r.inactive = false
	pr.active = true
	return nil
}

// Startall starts every request of reqs (MPI_STARTALL).
func Startall(reqs []*Request) error {
	if intercepted() {
		_, err := requestsCall(OpStartall, reqs).runOn(reqs, nil)
		return err
	}
	return pStartall(reqs)
}

// pStartall is Startall without interception.
func pStartall(reqs []*Request) error {
	for _, r := range reqs {
		if err := r.pStart(); err != nil {
			return err
		}
	}
	return nil
}
