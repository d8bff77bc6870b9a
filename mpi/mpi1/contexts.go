package mpi1

// NEWC makes a communication context in the current group context
// (MPI_NEWC) and returns its CCID. It does not communicate: its
// communicators are made at its first PUSHC, which every process of the
// group context calls. A group context holds at most mpi1_max_contexts
// contexts, its default one included (error status 11).
func (p *Proc) NEWC() int {
	if int64(len(p.g.ctxs)) >= maxContexts.Get() {
		return p.fail(ErrContexts)
	}
	cc := &cctx{id: p.id()}
	p.g.ctxs = append(p.g.ctxs, cc)
	return p.ok(cc.id)
}

// PUSHC makes ccid, a context NEWC made in the current group context,
// the current communication context until the matching POPC or the POPG
// that leaves the group context (MPI_PUSHC), and returns 0. Messages are
// sent in it and only its messages are received or probed. Every process
// of the group context calls it (the first push of a context makes its
// communicators, collectively). An unknown CCID is error status 4; more
// than mpi1_max_contexts pushed at once, 11.
func (p *Proc) PUSHC(ccid int) int {
	var cc *cctx
	for _, c := range p.g.ctxs {
		if c.id == ccid {
			cc = c
			break
		}
	}
	if cc == nil {
		return p.fail(ErrCCID)
	}
	if int64(len(p.g.stack)) >= maxContexts.Get() {
		return p.fail(ErrContexts)
	}
	if cc.reg == nil {
		if err := cc.open(p.g.all.comm); err != nil {
			return p.failed(err)
		}
	}
	p.g.stack = append(p.g.stack, cc)
	p.cc = cc
	return p.ok(0)
}

// POPC re-establishes the communication context in force before the
// matching PUSHC (MPI_POPC) and returns its CCID. At the group context's
// default context it does nothing and returns the default's CCID (the
// seed: the default context cannot be discarded).
func (p *Proc) POPC() int {
	if len(p.g.stack) > 1 {
		p.g.stack = p.g.stack[:len(p.g.stack)-1]
		p.cc = p.g.stack[len(p.g.stack)-1]
	}
	return p.ok(p.cc.id)
}

// INFOC returns the number of communication contexts made in the current
// group context, its default one included, and puts the CCIDs of the
// first maxlis of them in ilist, the default's first, then in the order
// NEWC made them (MPI_INFOC). A maxlis beyond ilist is error status 6.
func (p *Proc) INFOC(maxlis int, ilist []int) int {
	if maxlis < 0 || maxlis > len(ilist) {
		return p.fail(ErrBufSize)
	}
	for i := 0; i < maxlis && i < len(p.g.ctxs); i++ {
		ilist[i] = p.g.ctxs[i].id
	}
	return p.ok(len(p.g.ctxs))
}
