package mpi1

import (
	"errors"

	"github.com/tachyon-hpc/tachyon/mpi"
)

// Proc is one process's view of the MPI1 interface over a communicator:
// the seed's per-process state (the last message's length, source and
// type for INFOL, INFOS and INFOT; the error status for ERROR; the group
// context and communication context stacks; the message IDs) and the
// communicators that carry its messages. The seed's processes are single
// threaded: a Proc is not safe for concurrent use, and each rank has its
// own.
type Proc struct {
	gstack []*gctx // group contexts, the root first; the last is current
	g      *gctx   // the current group context
	cc     *cctx   // its current communication context

	// INFOL, INFOS, INFOT: the last message received or probed; -1 after
	// a probe that found none, and before any.
	length, source, typ int

	err   int   // ERROR
	cause error // Cause

	next int // the last GID, CCID or message ID given out
}

// gctx is a group context: the group whose processes it numbers 0..n-1
// (ALL within it), the communication contexts made in it, the groups
// made in it and the nonblocking operations started in it.
type gctx struct {
	all    *group
	ctxs   []*cctx // made in this context, the default first (INFOC's order)
	stack  []*cctx // pushed: the default first, the current last
	groups map[int]*group
	ops    map[int]*op
	defngs map[string]int // DEFNG calls made in this context, by list (defngTag)
}

// cctx is a communication context: two communicators over its group
// context's processes, reg for blocking and nonblocking messages and syn
// for synchronized ones, so that each matches only its own kind even with
// a wildcard type. A context made by NEWC gets them at its first PUSHC.
type cctx struct {
	id       int
	reg, syn *mpi.Comm
}

// group is a process group: its communicator (which also carries the
// acknowledgments of synchronized messages in its context, and its
// collectives), nil for a process DEFNG left out, and its members' PIDs
// in the group context that made it.
type group struct {
	id   int
	comm *mpi.Comm
	pids []int
}

// New returns the MPI1 interface over c for the calling rank: the world
// of a Run rank, or mpi.World() of a process job. The seed's processes
// are c's ranks, PID i being rank i, and they all belong to the group
// ALL. It is collective over c: every rank calls it, once (each call
// makes a new interface whose messages are apart from every other's and
// from c's own).
func New(c *mpi.Comm) (*Proc, error) {
	if c == nil {
		return nil, errors.New("mpi1: New with a nil communicator")
	}
	if c.IsInter() {
		return nil, errors.New("mpi1: New with an intercommunicator")
	}
	base, err := c.Dup()
	if err != nil {
		return nil, err
	}
	p := &Proc{length: -1, source: -1, typ: -1}
	all := &group{id: p.id(), comm: base, pids: identity(base.Size())}
	g, err := p.enter(all)
	if err != nil {
		base.Free()
		return nil, err
	}
	p.push(g)
	return p, nil
}

// Free releases the communicators of p, of every group context and
// communication context and every group it made; afterwards every
// routine of p fails with ErrCommFailed. It is not a seed routine. It
// does not communicate.
func (p *Proc) Free() error {
	var first error
	for i := len(p.gstack) - 1; i >= 0; i-- {
		if err := p.gstack[i].free(); err != nil && first == nil {
			first = err
		}
	}
	if err := p.gstack[0].all.comm.Free(); err != nil && first == nil {
		first = err
	}
	p.gstack = p.gstack[:1]
	p.g = p.gstack[0]
	p.cc = p.g.stack[0]
	return first
}

// id returns a new GID, CCID or message ID: unique in the process, never
// reused, and strictly positive, as the seed asks of each.
func (p *Proc) id() int {
	p.next++
	return p.next
}

// enter makes the group context of g: its default communication context
// is two duplicates of g's communicator, collective over g, fresh at each
// PUSHG (the seed: "a unique default communication context is
// established").
func (p *Proc) enter(g *group) (*gctx, error) {
	def := &cctx{id: p.id()}
	if err := def.open(g.comm); err != nil {
		return nil, err
	}
	return &gctx{all: g, ctxs: []*cctx{def}, stack: []*cctx{def},
		groups: map[int]*group{}, ops: map[int]*op{}}, nil
}

// push makes g the current group context.
func (p *Proc) push(g *gctx) {
	p.gstack = append(p.gstack, g)
	p.g = g
	p.cc = g.stack[len(g.stack)-1]
}

// open gives cc its communicators, duplicates of base (collective over
// base).
func (cc *cctx) open(base *mpi.Comm) error {
	reg, err := base.Dup()
	if err != nil {
		return err
	}
	syn, err := base.Dup()
	if err != nil {
		reg.Free()
		return err
	}
	cc.reg, cc.syn = reg, syn
	return nil
}

// free releases the communicators of g's communication contexts and of
// the groups made in g (not g's own group's, which its maker holds).
func (g *gctx) free() error {
	var first error
	keep := func(err error) {
		if err != nil && first == nil {
			first = err
		}
	}
	for _, cc := range g.ctxs {
		if cc.reg != nil {
			keep(cc.reg.Free())
			keep(cc.syn.Free())
		}
	}
	for _, gr := range g.groups {
		if gr.comm != nil {
			keep(gr.comm.Free())
		}
	}
	return first
}

// identity returns 0..n-1.
func identity(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}
