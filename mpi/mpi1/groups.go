package mpi1

import (
	"fmt"
	"hash/fnv"

	"github.com/tachyon-hpc/tachyon/mpi"
)

// ALL returns the GID of the group of the current group context: at
// first the predefined group of every process, and after PUSHG the
// pushed group, until the matching POPG (the seed's ALL).
func (p *Proc) ALL() int { return p.g.all.id }

// groupOf returns the group gid names in the current group context: ALL,
// or one made in this context and not freed; nil for any other.
func (p *Proc) groupOf(gid int) *group {
	if gid == p.g.all.id {
		return p.g.all
	}
	return p.g.groups[gid]
}

// member returns the group gid names if the calling process is in it.
func (p *Proc) member(gid int) *group {
	if g := p.groupOf(gid); g != nil && g.comm != nil {
		return g
	}
	return nil
}

// DEFNG makes a group of the nprocs processes whose PIDs plist lists
// (MPI_DEFNG) and returns its GID; plist's order is the group's: plist[i]
// has GCPID i in it. As the seed says, the processes listed call it,
// synchronously, with the same list, and no other process takes part:
// a caller outside its list gets error status 1 (5 in a pushed group
// context), as does a PID outside the group context or listed twice; an
// nprocs beyond plist, 6. The facade's CreateGroup makes the group's
// communicator among the listed processes alone, under a tag that every
// one of them derives alike from the list and from how many times DEFNG
// was called with it in this group context (defngTag); two calls whose
// lists overlap run one after the other on their shared processes, in
// the same order on each, as the seed's "synchronously" asks.
func (p *Proc) DEFNG(nprocs int, plist []int) int {
	if nprocs < 0 || nprocs > len(plist) {
		return p.fail(ErrBufSize)
	}
	base := p.g.all.comm
	n := base.Size()
	seen := make([]bool, n)
	for _, pid := range plist[:nprocs] {
		if pid < 0 || pid >= n || seen[pid] {
			return p.fail(p.pidErr())
		}
		seen[pid] = true
	}
	if !seen[base.Rank()] {
		return p.fail(p.pidErr())
	}
	whole, err := base.Group()
	if err != nil {
		return p.failed(err)
	}
	defer whole.Free()
	sub, err := whole.Incl(plist[:nprocs])
	if err != nil {
		return p.failed(err)
	}
	defer sub.Free()
	c, err := base.CreateGroup(sub, p.defngTag(plist[:nprocs]))
	if err != nil {
		return p.failed(err)
	}
	return p.made(c, append([]int(nil), plist[:nprocs]...))
}

// defngTag returns the tag of this DEFNG call with list in the current
// group context: a hash of the list and of the number of calls with it
// before, which every process listed counts alike since each takes part
// in every one of them.
func (p *Proc) defngTag(list []int) int {
	key := fmt.Sprint(list)
	if p.g.defngs == nil {
		p.g.defngs = map[string]int{}
	}
	seq := p.g.defngs[key]
	p.g.defngs[key] = seq + 1
	h := fnv.New64a()
	fmt.Fprint(h, key, "#", seq)
	return int(h.Sum64() >> 2)
}

// PARTG partitions the group gid into subgroups, the processes that pass
// the same key forming one (MPI_PARTG), and returns the GID of the
// caller's. Every process of gid calls it. A subgroup numbers its
// processes in their order in gid (as the seed's Table 1 does). Any int
// is a key.
func (p *Proc) PARTG(gid, key int) int {
	g := p.member(gid)
	if g == nil {
		return p.fail(ErrGID)
	}
	// Split's colors are the non-negative ints: split by the key's sign,
	// then by its magnitude on that side.
	side, mag := 0, key
	if key < 0 {
		side, mag = 1, -(key + 1)
	}
	half, err := g.comm.Split(side, g.comm.Rank())
	if err != nil {
		return p.failed(err)
	}
	c, err := half.Split(mag, half.Rank())
	half.Free()
	if err != nil {
		return p.failed(err)
	}
	return p.made(c, p.pidsOf(c))
}

// made records a group made in the current group context, of
// communicator c (nil if the caller is not in it) and members pids, and
// returns its GID.
func (p *Proc) made(c *mpi.Comm, pids []int) int {
	g := &group{id: p.id(), comm: c, pids: pids}
	p.g.groups[g.id] = g
	return p.ok(g.id)
}

// pidsOf returns the PIDs, in the current group context, of c's ranks.
func (p *Proc) pidsOf(c *mpi.Comm) []int {
	cg, err := c.Group()
	if err != nil {
		return nil
	}
	defer cg.Free()
	all, err := p.g.all.comm.Group()
	if err != nil {
		return nil
	}
	defer all.Free()
	pids, err := mpi.GroupTranslateRanks(cg, identity(cg.Size()), all)
	if err != nil {
		return nil
	}
	return pids
}

// FREEG discards the group gid, made in the current group context
// (MPI_FREEG), and returns 0. ALL cannot be freed (error status 2).
func (p *Proc) FREEG(gid int) int {
	g := p.g.groups[gid]
	if g == nil {
		return p.fail(ErrGID)
	}
	delete(p.g.groups, gid)
	if g.comm != nil {
		if err := g.comm.Free(); err != nil {
			return p.failed(err)
		}
	}
	return p.ok(0)
}

// GETID returns the caller's GCPID in the group gid (MPI_GETID), or -1
// with error status 0 if it is not in the group.
func (p *Proc) GETID(gid int) int {
	g := p.groupOf(gid)
	if g == nil {
		return p.fail(ErrGID)
	}
	if g.comm == nil {
		return p.ok(-1)
	}
	return p.ok(g.comm.Rank())
}

// INFOG returns the number of processes in the group gid, of which the
// caller must be a member, and puts the PIDs of the first maxlis of them
// (in GCPID order, numbered in the current group context: ALL's are
// 0..n-1) in plist (MPI_INFOG). A maxlis beyond plist is error status 6.
func (p *Proc) INFOG(gid, maxlis int, plist []int) int {
	g := p.member(gid)
	if g == nil {
		return p.fail(ErrGID)
	}
	if maxlis < 0 || maxlis > len(plist) {
		return p.fail(ErrBufSize)
	}
	if g == p.g.all { // numbered as the context numbers its processes: 0..n-1
		n := g.comm.Size()
		for i := 0; i < maxlis && i < n; i++ {
			plist[i] = i
		}
		return p.ok(n)
	}
	copy(plist[:maxlis], g.pids)
	return p.ok(len(g.pids))
}

// SYNCG returns 0 once every process of the group gid, of which the
// caller must be a member, has called it (MPI_SYNCG, a barrier).
func (p *Proc) SYNCG(gid int) int {
	g := p.member(gid)
	if g == nil {
		return p.fail(ErrGID)
	}
	if err := g.comm.Barrier(); err != nil {
		return p.failed(err)
	}
	return p.ok(0)
}

// PUSHG establishes the group context of gid (MPI_PUSHG) and returns its
// number of processes. Every process of gid calls it. Until the matching
// POPG: process numbers are GCPIDs in gid (the seed's Table 1), ALL is
// gid, messages go in a fresh default communication context of their
// own, and only groups made inside may be named. Contexts nest, up to
// mpi1_max_group_depth deep (error status 12). A nonblocking operation
// active in the current communication context, which the seed forbids,
// is error status 15.
func (p *Proc) PUSHG(gid int) int {
	g := p.member(gid)
	if g == nil {
		return p.fail(ErrGID)
	}
	if int64(len(p.gstack)) > maxGroupDepth.Get() {
		return p.fail(ErrGroups)
	}
	if p.pendingIn(p.cc) {
		return p.fail(ErrPending)
	}
	ctx, err := p.enter(g)
	if err != nil {
		return p.failed(err)
	}
	p.push(ctx)
	return p.ok(g.comm.Size())
}

// POPG leaves the current group context for the one PUSHG left
// (MPI_POPG) and returns the GID of the group whose context is
// re-established. Every process of the group left calls it. The
// communication contexts and groups made inside are discarded, and the
// communication context in force before PUSHG is back. With no group
// context pushed it is error status 12; with a nonblocking operation of
// the context active (the seed forbids it, and POPG would lose it), 15.
func (p *Proc) POPG() int {
	if len(p.gstack) == 1 {
		return p.fail(ErrGroups)
	}
	if p.pendingIn(nil) {
		return p.fail(ErrPending)
	}
	left := p.g
	p.gstack = p.gstack[:len(p.gstack)-1]
	p.g = p.gstack[len(p.gstack)-1]
	p.cc = p.g.stack[len(p.g.stack)-1]
	if err := left.free(); err != nil {
		return p.failed(err)
	}
	return p.ok(p.g.all.id)
}
