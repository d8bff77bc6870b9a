package mpi

import (
	"slices"
	"sort"

	"github.com/tachyon-hpc/tachyon/asm"
)

// Intercommunicators (MPI-4.1 section 7.6): a communicator between two
// disjoint groups, the local group the caller belongs to and the remote
// group. Point-to-point on one names ranks of the remote group. The
// connections between processes started apart (Listen, Dial,
// Comm.Accept, Comm.Connect) are intercommunicators; Merge makes an
// intracommunicator of both groups.
//
// Every rank of both groups is a rank of one world (a connection's), so
// the collectives an intercommunicator needs run over the union of its
// groups (coll), in its collective context.

// newInterComm returns the intercommunicator between local, which holds
// the caller, and remote, on context pair pair.
func newInterComm(p *proc, local, remote *Group, pair uint32) *Comm {
	c := &Comm{p: p, group: local, rank: local.Rank(), size: local.Size(), peers: remote, psize: remote.Size(), ctx: 2 * pair}
	union := slices.Concat(local.worldRanks(), remote.worldRanks())
	slices.Sort(union)
	c.coll = &Comm{p: p, ctx: c.ctx}
	c.coll.group = newGroup(union, p.ep.Rank())
	c.coll.rank, c.coll.size = c.coll.group.Rank(), len(union)
	c.coll.peers, c.coll.psize, c.coll.coll = c.coll.group, c.coll.size, c.coll
	c.local = &Comm{p: p, group: local, rank: c.rank, size: c.size, peers: local, psize: c.size, ctx: c.ctx}
	c.local.coll = c.local
	return c
}

// IsInter reports whether c is an intercommunicator (MPI_COMM_TEST_INTER).
func (c *Comm) IsInter() bool { return c != nil && c.coll != c }

// peerGroupWord names the group point-to-point on c addresses, for
// errors.
func (c *Comm) peerGroupWord() string {
	if c.IsInter() {
		return "remote group"
	}
	return "communicator"
}

// RemoteSize returns the size of c's remote group
// (MPI_COMM_REMOTE_SIZE), ErrComm for an intracommunicator.
func (c *Comm) RemoteSize() (int, error) {
	if err := c.check("RemoteSize"); err != nil {
		return 0, err
	}
	if !c.IsInter() {
		return 0, c.fail(errorf(ErrComm, "RemoteSize", "%s is not an intercommunicator", c.label()))
	}
	return c.psize, nil
}

// RemoteGroup returns c's remote group (MPI_COMM_REMOTE_GROUP), ErrComm
// for an intracommunicator.
func (c *Comm) RemoteGroup() (*Group, error) {
	if err := c.check("RemoteGroup"); err != nil {
		return nil, err
	}
	if !c.IsInter() {
		return nil, c.fail(errorf(ErrComm, "RemoteGroup", "%s is not an intercommunicator", c.label()))
	}
	return newGroup(c.peers.worldRanks(), c.p.ep.Rank()), nil
}

// Merge returns an intracommunicator of both of c's groups
// (MPI_INTERCOMM_MERGE): the group whose ranks pass high false first,
// each group in its own order. Every rank of a group passes the same
// high; if both groups pass the same, the group that accepted the
// connection comes first. It is collective over both groups.
func (c *Comm) Merge(high bool) (*Comm, error) {
	if intercepted() {
		call := newCall(OpMerge, c)
		call.High = high
		return call.runComm()
	}
	return c.pMerge(high)
}

// pMerge is Merge without interception.
func (c *Comm) pMerge(high bool) (*Comm, error) {
	const op = "Merge"
	if err := c.check(op); err != nil {
		return nil, err
	}
	if !c.IsInter() {
		return nil, c.fail(errorf(ErrComm, op, "%s is not an intercommunicator", c.label()))
	}
	h := uint64(0)
	if high {
		h = 1
	}
	pair, vals, err := c.coll.agreeContext(op, h)
	if err != nil {
		return nil, c.fail(err)
	}
	// vals is in the union's order: world ranks ascending. Each group's
	// ranks must agree on high.
	mine, theirs := -1, -1
	for r, v := range vals {
		w := c.coll.group.worldRank(r)
		at := &theirs
		if c.group.rankOf(w) != Undefined {
			at = &mine
		}
		switch {
		case *at == -1:
			*at = int(v[1])
		case *at != int(v[1]):
			return nil, c.fail(errorf(ErrArg, op, "the ranks of one group passed different values of high"))
		}
	}
	local, remote := c.group.worldRanks(), c.peers.worldRanks()
	first := mine == 0 && theirs == 1 || mine == theirs && local[0] < remote[0]
	ranks := slices.Concat(remote, local)
	if first {
		ranks = slices.Concat(local, remote)
	}
	d := newComm(c.p, newGroup(ranks, c.p.ep.Rank()), pair)
	d.errh.Store(c.errh.Load())
	return d, nil
}

// interDup is Dup for an intercommunicator: the same groups, a context
// agreed over both.
func (c *Comm) interDup(op string) (*Comm, error) {
	pair, _, err := c.coll.agreeContext(op)
	if err != nil {
		return nil, err
	}
	d := newInterComm(c.p, c.group, c.peers, pair)
	d.errh.Store(c.errh.Load())
	return d, nil
}

// interSplit is Split for an intercommunicator (MPI-4.1 section 7.4.2):
// the ranks of each group that pass the same color form the new local
// group, ordered by key and then rank, with the ranks of the other group
// that passed that color as its remote group. A rank whose color no rank
// of the other group passed, or that passed Undefined, gets nil.
func (c *Comm) interSplit(op string, color, key int) (*Comm, error) {
	pair, vals, err := c.coll.agreeContext(op, uint64(int64(color)), uint64(int64(key)))
	if err != nil {
		return nil, err
	}
	if color == Undefined {
		return nil, nil
	}
	type member struct{ key, rank, world int }
	var local, remote []member
	for r, v := range vals {
		if int(int64(v[1])) != color {
			continue
		}
		w := c.coll.group.worldRank(r)
		if lr := c.group.rankOf(w); lr != Undefined {
			local = append(local, member{int(int64(v[2])), lr, w})
		} else {
			remote = append(remote, member{int(int64(v[2])), c.peers.rankOf(w), w})
		}
	}
	if len(remote) == 0 {
		return nil, nil
	}
	order := func(ms []member) []int {
		sort.SliceStable(ms, func(i, j int) bool {
			if ms[i].key != ms[j].key {
				return ms[i].key < ms[j].key
			}
			return ms[i].rank < ms[j].rank
		})
		ws := make([]int, len(ms))
		for i, m := range ms {
			ws[i] = m.world
		}
		return ws
	}
	me := c.p.ep.Rank()
	d := newInterComm(c.p, newGroup(order(local), me), newGroup(order(remote), me), pair)
	d.errh.Store(c.errh.Load())
	return d, nil
}

// interCreate is Create for an intercommunicator: g is a subgroup of the
// local group, which every local rank passes alike; the result joins it
// to the subgroup the other group passed, nil to the ranks outside g and
// to every rank if either subgroup is empty.
func (c *Comm) interCreate(op string, g *Group) (*Comm, error) {
	color, key := Undefined, 0
	if r := g.rankOf(c.p.ep.Rank()); r != Undefined {
		color, key = 0, r
	}
	return c.interSplit(op, color, key)
}

// compareInter is Compare for two communicators of which one at least
// is an intercommunicator.
func compareInter(a, b *Comm) (Comparison, error) {
	if !a.IsInter() || !b.IsInter() {
		return Unequal, nil
	}
	l, err := GroupCompare(a.group, b.group)
	if err != nil {
		return 0, err
	}
	r, err := GroupCompare(a.peers, b.peers)
	if err != nil {
		return 0, err
	}
	switch {
	case l == Ident && r == Ident:
		return Congruent, nil
	case l == Unequal || r == Unequal:
		return Unequal, nil
	}
	return Similar, nil
}

// freedInter marks an intercommunicator's union freed along with it.
func (c *Comm) freedInter() {
	if c.IsInter() {
		asm.StoreRelaxed32(&c.coll.freed, 1)
		c.coll.shmFree() // the union's collective area, if it took one
	}
}
