package mpi

import (
	"github.com/tachyon-hpc/tachyon/cvar"
	"github.com/tachyon-hpc/tachyon/pvar"
)

// Hierarchical collectives. On a communicator whose ranks span hosts,
// with more than one rank on some host, Barrier, Bcast, Reduce and
// Allreduce run in phases: within each host, between the hosts' leaders
// (each host's lowest rank of the communicator), and within each host
// again. A host then puts one message on the network per step of the
// leaders' algorithm, where the flat algorithms put one per rank, and a
// step within the host goes through its shared memory. The phases are the
// algorithms of collalg.go, built on views of the communicator (its ranks
// on this host; the leaders), as an intercommunicator's local group is
// (intercoll.go): the schedule is one, so the blocking, nonblocking and
// persistent forms all run it, and an error travels along its data as in
// any other.

// Control variables.
var (
	collHierOn = cvar.NewBool("mpi_coll_hier", true,
		"Whether Barrier, Bcast, Reduce and Allreduce on a communicator whose ranks span hosts, with more than one rank on some host, run hierarchically: within each host, between one leader per host, within each host again. Every rank must have the same setting.",
		cvar.WithCategory("mpi"))
	collHierMax = cvar.NewInt("mpi_coll_hier_max", 1<<40,
		"Largest Bcast, Reduce or Allreduce, in bytes, run hierarchically (mpi_coll_hier); larger ones run the flat algorithms over every rank. Every rank must have the same.",
		cvar.WithCategory("mpi"), cvar.WithRange(0, 1<<40), cvar.WithUnit("bytes"))
)

// Which ran (performance variables): the phases' algorithms count too.
var (
	pvHierBarrier = pvar.NewCounter("mpi_coll_hier_barrier",
		"Barriers run hierarchically (mpi_coll_hier).", pvar.WithUnit("calls"))
	pvHierBcast = pvar.NewCounter("mpi_coll_hier_bcast",
		"Broadcasts run hierarchically (mpi_coll_hier).", pvar.WithUnit("calls"))
	pvHierReduce = pvar.NewCounter("mpi_coll_hier_reduce",
		"Reduces run hierarchically (mpi_coll_hier).", pvar.WithUnit("calls"))
	pvHierAllreduce = pvar.NewCounter("mpi_coll_hier_allreduce",
		"Allreduces run hierarchically (mpi_coll_hier).", pvar.WithUnit("calls"))
)

// collHier is how a communicator's ranks sit on hosts, for the
// hierarchical algorithms. Hosts are numbered in the order of their lowest
// rank, so that a host's leader is local rank 0 of its view.
type collHier struct {
	host    []int32 // by rank: its host's number
	leader  []int   // by host: its lowest rank, its leader
	local   *Comm   // view of this rank's host's ranks, in rank order
	leaders *Comm   // view of the leaders, by host; its rank is this rank's host's number on a leader
	blocked bool    // every host's ranks are consecutive: host order is rank order
	aligned bool    // blocked, and every host has the same number of ranks, a power of two
}

// flatHier marks a communicator without hierarchy.
var flatHier = new(collHier)

// hier returns c's layout on hosts if its collectives may run
// hierarchically, nil if they run flat: c's ranks on one host, each on a
// host of its own, or an intercommunicator's views. Worked out at the
// first call and kept; every rank works out the same from the job's table
// of hosts (proc.hosts).
func (c *Comm) hier() *collHier {
	h := c.hierLayout.Load()
	if h == nil {
		h = newCollHier(c)
		c.hierLayout.Store(h)
	}
	if h == flatHier {
		return nil
	}
	return h
}

// newCollHier works out c's layout on hosts.
func newCollHier(c *Comm) *collHier {
	hosts := c.p.hosts
	if hosts == nil || c.coll != c || c.size < 3 {
		return flatHier
	}
	h := &collHier{host: make([]int32, c.size), blocked: true}
	num := make(map[int32]int32) // host id -> number
	for i := range c.size {
		id := hosts[c.group.worldRank(i)]
		k, ok := num[id]
		if !ok {
			k = int32(len(h.leader))
			num[id] = k
			h.leader = append(h.leader, i)
		} else if h.host[i-1] != k {
			h.blocked = false
		}
		h.host[i] = k
	}
	if len(h.leader) < 2 || len(h.leader) == c.size {
		return flatHier
	}
	per := c.size / len(h.leader)
	h.aligned = h.blocked && per&(per-1) == 0 && per*len(h.leader) == c.size
	for k := 1; h.aligned && k < len(h.leader); k++ {
		h.aligned = h.leader[k] == k*per
	}
	mine := h.host[c.rank]
	var local, leaders []int
	for i := range c.size {
		if h.host[i] == mine {
			local = append(local, c.group.worldRank(i))
		}
	}
	for _, l := range h.leader {
		leaders = append(leaders, c.group.worldRank(l))
	}
	me := c.group.worldRank(c.rank)
	h.local, h.leaders = c.view(local, me), c.view(leaders, me)
	return h
}

// view returns a view of world ranks ranks as an intracommunicator, for
// the algorithms to build on: only its group, rank and size are used, and
// every step names world ranks.
func (c *Comm) view(ranks []int, me int) *Comm {
	g := newGroup(ranks, me)
	v := &Comm{p: c.p, group: g, rank: g.Rank(), size: g.Size(), peers: g, psize: g.Size(), ctx: c.ctx}
	v.coll = v
	v.hierLayout.Store(flatHier)
	return v
}

// leads reports whether this rank is its host's leader.
func (h *collHier) leads(r int) bool { return h.leader[h.host[r]] == r }

// hierFor returns c's layout if a's collective runs hierarchically, nil if
// it runs flat. Barrier and Bcast run hierarchically on every layout: the
// dissemination barrier and a binomial tree rooted elsewhere than a host's
// first rank cross hosts at nearly every step. A Reduce does where a host's
// ranks are not consecutive: on consecutive ones the binomial tree's
// subtrees are runs of ranks, which keep to a host, and going up to a
// leader first only adds steps. An Allreduce does unless the hosts'
// ranks are consecutive and as many on each, a power of two: then the
// first rounds of recursive doubling (and of Rabenseifner's halving), with
// the partners nearest in rank, stay within each host and the rest cross
// once for the whole host, where the hierarchy adds the rounds of its
// broadcast. A non-commutative operation needs rank order: it runs
// hierarchically only on consecutive ranks.
func hierFor(c *Comm, a *collArgs) *collHier {
	if !collHierOn.Get() {
		return nil
	}
	h := c.hier()
	if h == nil || a.kind == collBarrier {
		return h
	}
	nb := len(a.recv) // alike on every rank: a Reduce's recv is root's alone
	if a.kind == collReduce {
		nb = a.count
	}
	switch {
	case int64(nb) > collHierMax.Get():
		return nil
	case a.kind == collReduce && (h.blocked || !a.op.Commutative()):
		return nil
	case a.kind == collAllreduce && (h.aligned || !h.blocked && !a.op.Commutative()):
		return nil
	}
	return h
}

// hierBarrier: the host's ranks signal their leader up a binomial tree,
// the leaders run the dissemination barrier, and each leader releases its
// host's ranks down one.
func hierBarrier(s *sched, h *collHier) {
	pvHierBarrier.Add(1)
	c := s.c
	defer func() { s.c = c }()
	s.c = h.local
	fanIn(s)
	if h.leads(c.rank) {
		s.c = h.leaders
		buildBarrier(s)
		s.c = h.local
	}
	bcastBinomial(s, nil, 0)
}

// fanIn: each rank of s.c signals local rank 0 up a binomial tree (empty
// messages), once the ranks below it in the tree have signalled it.
func fanIn(s *sched) {
	n, r := s.c.size, s.c.rank
	for mask := 1; mask < n; mask <<= 1 {
		if r&mask != 0 {
			s.send(r-mask, nil)
			s.wait()
			return
		}
		if r|mask < n {
			s.recv(r|mask, nil)
			s.wait()
		}
	}
}

// hierBcast: a root that does not lead its host hands buf to its leader,
// the leaders broadcast it, and each leader to its host's ranks.
func hierBcast(s *sched, h *collHier, buf []byte, root int) {
	pvHierBcast.Add(1)
	c := s.c
	defer func() { s.c = c }()
	r := c.rank
	rootHost := int(h.host[root])
	if lead := h.leader[rootHost]; lead != root {
		switch r {
		case root:
			s.send(lead, buf)
			s.wait()
		case lead:
			s.recv(root, buf)
			s.wait()
		}
	}
	if h.leads(r) {
		s.c = h.leaders
		buildBcast(s, buf, rootHost)
	}
	s.c = h.local
	buildBcast(s, buf, 0)
}

// hierReduce: each host's ranks reduce to their leader, the leaders to the
// leader of root's host, which hands the result to root if it does not
// lead. It combines by host, then by rank within each: rank order where
// the hosts' ranks are consecutive, so a non-commutative operation could
// run it there (hierFor keeps such layouts flat).
func hierReduce(s *sched, h *collHier, a *collArgs) {
	pvHierReduce.Add(1)
	c := s.c
	defer func() { s.c = c }()
	r, nb := c.rank, a.count
	rootHost := int(h.host[a.root])
	lead := h.leader[rootHost]
	inPlace := r == a.root && a.inPlace
	mine := a.send
	if inPlace {
		mine = a.recv
	}
	sub := collArgs{kind: collReduce, op: a.op, count: nb, unit: a.unit, esize: a.esize}

	// Within the host, to its leader: into root's recv at root, else into
	// scratch space.
	s.c = h.local
	acc := mine
	if s.c.size > 1 {
		acc = nil
		if h.leads(r) {
			acc = a.recv
			if r != a.root {
				acc = s.scratch(nb)
			}
		}
		sub.send, sub.recv, sub.root, sub.inPlace = mine, acc, 0, inPlace
		buildReduce(s, &sub)
	}
	if h.leads(r) {
		// Between the leaders, to root's host's.
		var res []byte
		switch {
		case r == a.root:
			res = a.recv
		case r == lead:
			res = s.scratch(nb)
		}
		s.c = h.leaders
		sub.send, sub.recv, sub.root = acc, res, rootHost
		sub.inPlace = r == a.root && (h.local.size > 1 || inPlace) // acc is root's recv
		buildReduce(s, &sub)
		if r == lead && r != a.root {
			s.c = c
			s.send(a.root, res)
			s.wait()
		}
	}
	if r == a.root && r != lead {
		s.c = c
		s.recv(lead, a.recv)
		s.wait()
	}
}

// hierAllreduce: each host's ranks reduce to their leader, the leaders
// allreduce (by the algorithm collalg.go chooses for them), and each
// leader broadcasts the result to its host's ranks.
func hierAllreduce(s *sched, h *collHier, a *collArgs) {
	pvHierAllreduce.Add(1)
	c := s.c
	defer func() { s.c = c }()
	r, nb := c.rank, len(a.recv)
	src := a.send
	if a.inPlace {
		src = a.recv
	}
	s.c = h.local
	if s.c.size > 1 {
		var into []byte
		if h.leads(r) {
			into = a.recv
		}
		buildReduce(s, &collArgs{kind: collReduce, send: src, recv: into, root: 0, op: a.op, count: nb, unit: a.unit, esize: a.esize, inPlace: a.inPlace})
	} else {
		s.copy(a.recv, src)
	}
	if h.leads(r) {
		s.c = h.leaders
		buildAllreduce(s, &collArgs{kind: collAllreduce, recv: a.recv, inPlace: true, op: a.op, count: nb, unit: a.unit, esize: a.esize, k: a.k})
		s.c = h.local
	}
	buildBcast(s, a.recv, 0)
}
