package mpi1

import "github.com/tachyon-hpc/tachyon/mpi"

// op is a nonblocking send or receive under its message ID.
type op struct {
	r    *mpi.Request
	cc   *cctx // the communication context it runs in
	recv bool
	n    int // a send's length
}

// started records the nonblocking operation r (a receive if recv, else a
// send of n bytes) that its routine started with err, and returns its
// message ID.
func (p *Proc) started(r *mpi.Request, err error, recv bool, n int) int {
	if err != nil {
		return p.failed(err)
	}
	id := p.id()
	p.g.ops[id] = &op{r: r, cc: p.cc, recv: recv, n: n}
	return p.ok(id)
}

// lookup returns the active operation of the current group context with
// message ID msgid, or nil.
func (p *Proc) lookup(msgid int) *op {
	return p.g.ops[msgid]
}

// WAIT blocks until the nonblocking send or receive msgid has completed
// (MPI_WAIT): a send's buffer may then be reused, a receive's message is
// in its buffer, and INFOL, INFOS and INFOT describe it. It returns the
// bytes sent, or the whole length of the message received (as a
// blocking receive would). The message ID is then spent: using it again
// is error status 3.
func (p *Proc) WAIT(msgid int) int {
	o := p.lookup(msgid)
	if o == nil {
		return p.fail(ErrMSGID)
	}
	delete(p.g.ops, msgid)
	st, err := o.r.Wait()
	return p.completed(o, st, err)
}

// STATS reports whether the nonblocking send or receive msgid has
// completed (MPI_STATS): if so, it returns what WAIT would and spends the
// message ID; if not, it returns -1 with error status 0, and the
// operation goes on.
func (p *Proc) STATS(msgid int) int {
	o := p.lookup(msgid)
	if o == nil {
		return p.fail(ErrMSGID)
	}
	st, done, err := o.r.Test()
	if !done && err == nil {
		return p.ok(-1)
	}
	delete(p.g.ops, msgid)
	return p.completed(o, st, err)
}

// CANCEL withdraws the nonblocking send or receive msgid (MPI_CANCEL) and
// returns 0: a receive nothing has matched is withdrawn with its buffer
// untouched, a send no receive has matched is not delivered. One that
// had already matched completes first (the seed: it "may or may not have
// completed"), and INFOL, INFOS and INFOT are left as they were either
// way. The message ID is then spent.
func (p *Proc) CANCEL(msgid int) int {
	o := p.lookup(msgid)
	if o == nil {
		return p.fail(ErrMSGID)
	}
	delete(p.g.ops, msgid)
	if err := o.r.Cancel(); err != nil {
		return p.failed(err)
	}
	if _, err := o.r.Wait(); err != nil {
		if _, trunc := mpi.TruncatedLength(err); !trunc {
			return p.failed(err)
		}
	}
	return p.ok(0)
}

// completed finishes o, which completed with st and err.
func (p *Proc) completed(o *op, st mpi.Status, err error) int {
	if o.recv {
		return p.received(st, err)
	}
	if err != nil {
		return p.failed(err)
	}
	return p.ok(o.n)
}

// pendingIn reports whether an operation of the current group context
// is active in communication context cc (any, if cc is nil).
func (p *Proc) pendingIn(cc *cctx) bool {
	if cc == nil {
		return len(p.g.ops) > 0
	}
	for _, o := range p.g.ops {
		if o.cc == cc {
			return true
		}
	}
	return false
}
