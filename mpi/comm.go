package mpi

import (
	"errors"
	"fmt"
	"sort"
	"sync/atomic"

	"github.com/tachyon-hpc/tachyon/asm"
	"github.com/tachyon-hpc/tachyon/engine"
)

// Comm is a communicator: a group of ranks and a context that keeps its
// messages apart from every other communicator's (MPI_Comm). Its methods
// are safe for concurrent use.
type Comm struct {
	p      *proc
	group  *Group
	rank   int
	size   int
	peers  *Group                     // the ranks point-to-point names: group, or an intercommunicator's remote group
	psize  int                        // peers' size
	coll   *Comm                      // the intracommunicator collectives run over: c, or an intercommunicator's union of both groups
	local  *Comm                      // an intercommunicator's local group as an intracommunicator, for its collectives (intercoll.go)
	ctx    uint32                     // point-to-point context; ctx+1 carries internal collectives
	freed  uint32                     // 1 once freed (asm.StoreRelaxed32), read with asm.LoadRelaxed32 so that the usual path's checks stay one chain of compares
	errh   atomic.Pointer[Errhandler] // nil: ErrorsReturn
	name   atomic.Pointer[string]     // SetName's, nil if none: any goroutine may name or read at ThreadMultiple
	worldC bool                       // ranks are world ranks: no translation
	attrs  attrs                      // SetAttr's, in the order set

	abandoned atomic.Bool // a collective on c was abandoned by its context: the rest fail (collectiveLive)

	collSeq   atomic.Uint32         // nonblocking collectives called on c, for their tags (collsched.go)
	collCache atomic.Pointer[sched] // the schedule blocking collectives reuse, at ThreadMultiple
	collPlain *sched                // the same below ThreadMultiple
	shm       *collShm              // the shared-memory collectives' side (collshm.go), when shmState is shmOn
	shmState  uint8                 // shmUnknown until the first collective decides

	hierLayout atomic.Pointer[collHier] // how the ranks sit on hosts (collhier.go), worked out at the first collective that asks
}

func newComm(p *proc, g *Group, pair uint32) *Comm {
	c := &Comm{p: p, group: g, rank: g.Rank(), size: g.Size(), peers: g, psize: g.Size(), ctx: 2 * pair}
	c.coll = c
	c.worldC = g.Size() == p.ep.Size()
	for i := 0; c.worldC && i < g.Size(); i++ {
		c.worldC = g.worldRank(i) == i
	}
	return c
}

// check validates c before a routine uses it; the error goes through c's
// error handler, or for a nil communicator the process's Self's.
func (c *Comm) check(op string) error {
	if c == nil || c.p.ended() || asm.LoadRelaxed32(&c.freed) != 0 {
		return c.checkFailed(op)
	}
	return nil
}

// checkFailed is check's error, out of line.
func (c *Comm) checkFailed(op string) error {
	switch {
	case c == nil:
		return noComm(errorf(ErrComm, op, "nil communicator (World and Self are nil before Init)"))
	case c.p.ended():
		return c.handle(c.p.endError(op))
	}
	return c.handle(errorf(ErrComm, op, "communicator %s was freed", c.label()))
}

func (c *Comm) label() string {
	if n := c.Name(); n != "" {
		return n
	}
	return fmt.Sprintf("context %d", c.ctx/2)
}

// engineErr maps an engine error to its MPI class; it inlines to a compare
// for nil.
func (c *Comm) engineErr(op string, err error) error {
	if err == nil {
		return nil
	}
	return c.classify(op, err)
}

// engineClasses gives the MPI class of each engine error, in the order
// classify tries them; an error matching none is ErrOther.
var engineClasses = [...]struct {
	err   error
	class error
}{
	{engine.ErrTruncate, ErrTruncate},
	{engine.ErrPeerDead, ErrProcFailed},
	{engine.ErrClosed, ErrNotInitialized},
	{engine.ErrBuffer, ErrBuffer},
	{engine.ErrRequest, ErrRequest},
	{engine.ErrRank, ErrRank},
	{engine.ErrTag, ErrTag},
}

// classify is engineErr for an error.
func (c *Comm) classify(op string, err error) error {
	cls := ErrOther
	for _, e := range engineClasses {
		if errors.Is(err, e.err) {
			cls = e.class
			break
		}
	}
	if cls == ErrNotInitialized {
		// The endpoint closed: by Finalize, its session's Close or its
		// connection's Disconnect, each with its class.
		cls = c.p.endError(op).Class
	}
	return &Error{Class: cls, Op: op, Detail: "on " + c.label(), Err: err}
}

// Rank returns the calling rank's rank in c (MPI_COMM_RANK), or -1 if c
// is not usable.
func (c *Comm) Rank() int {
	if c.check("Rank") != nil {
		return -1
	}
	return c.rank
}

// Size returns the number of ranks in c (MPI_COMM_SIZE), or 0 if c is not
// usable.
func (c *Comm) Size() int {
	if c.check("Size") != nil {
		return 0
	}
	return c.size
}

// Group returns a group of c's ranks (MPI_COMM_GROUP); freeing it does not
// affect c.
func (c *Comm) Group() (*Group, error) {
	if err := c.check("Group"); err != nil {
		return nil, err
	}
	return newGroup(c.group.worldRanks(), c.p.ep.Rank()), nil
}

// Name returns the name given with SetName (MPI_COMM_GET_NAME).
func (c *Comm) Name() string {
	if c == nil {
		return ""
	}
	if n := c.name.Load(); n != nil {
		return *n
	}
	return ""
}

// SetName names c for error messages and tools (MPI_COMM_SET_NAME).
func (c *Comm) SetName(name string) error {
	if err := c.check("SetName"); err != nil {
		return err
	}
	c.name.Store(&name)
	return nil
}

// Barrier returns once every rank of c has called it (MPI_BARRIER).
func (c *Comm) Barrier() error {
	if intercepted() {
		return newCall(OpBarrier, c).run()
	}
	return c.pBarrier()
}

// pBarrier is Barrier without interception.
func (c *Comm) pBarrier() error {
	if err := c.check("Barrier"); err != nil {
		return err
	}
	return c.fail(c.coll.barrier("Barrier"))
}

// agreeContext settles, collectively over c, on a context pair that no
// rank of c uses yet, with extra words gathered alongside; every rank
// then considers the pair taken.
func (c *Comm) agreeContext(op string, extra ...uint64) (uint32, [][]uint64, error) {
	c.p.mu.Lock()
	mine := append([]uint64{uint64(c.p.nextCtx)}, extra...)
	c.p.mu.Unlock()
	vals, err := c.allgather(op, mine)
	if err != nil {
		return 0, nil, err
	}
	var pair uint32
	for _, v := range vals {
		pair = max(pair, uint32(v[0]))
	}
	c.p.mu.Lock()
	c.p.nextCtx = max(c.p.nextCtx, pair+1)
	c.p.mu.Unlock()
	return pair, vals, nil
}

// Dup returns a new communicator with c's group and a context of its own
// (MPI_COMM_DUP), and the attributes c's keyvals' copiers give it. It is
// collective over c (over both groups of an intercommunicator, whose
// duplicate joins the same groups).
func (c *Comm) Dup() (*Comm, error) {
	if intercepted() {
		return newCall(OpDup, c).runComm()
	}
	return c.pDup()
}

// pDup is Dup without interception.
func (c *Comm) pDup() (*Comm, error) {
	if err := c.check("Dup"); err != nil {
		return nil, err
	}
	if c.IsInter() {
		d, err := c.interDup("Dup")
		if err == nil {
			err = c.copyAttrs(d)
		}
		if err != nil {
			return nil, c.fail(err)
		}
		return d, nil
	}
	pair, _, err := c.agreeContext("Dup")
	if err != nil {
		return nil, c.fail(err)
	}
	d := newComm(c.p, c.group, pair)
	d.errh.Store(c.errh.Load())
	if err := c.copyAttrs(d); err != nil {
		asm.StoreRelaxed32(&d.freed, 1)
		return nil, c.fail(err)
	}
	return d, nil
}

// Split partitions c by color: ranks that pass the same color get a new
// communicator together, ordered by key and then by their rank in c
// (MPI_COMM_SPLIT). A rank that passes Undefined gets (nil, nil). It is
// collective over c. On an intercommunicator each group splits so, and
// each new local group is joined to the ranks of the remote group that
// passed its color (nil if none did).
func (c *Comm) Split(color, key int) (*Comm, error) {
	if intercepted() {
		call := newCall(OpSplit, c)
		call.color, call.key = color, key
		return call.runComm()
	}
	return c.pSplit(color, key)
}

// pSplit is Split without interception.
func (c *Comm) pSplit(color, key int) (*Comm, error) {
	if err := c.check("Split"); err != nil {
		return nil, err
	}
	if color < 0 && color != Undefined {
		return nil, c.fail(errorf(ErrArg, "Split", "color %d: must be non-negative or Undefined", color))
	}
	if c.IsInter() {
		d, err := c.interSplit("Split", color, key)
		return d, c.fail(err)
	}
	pair, vals, err := c.agreeContext("Split", uint64(int64(color)), uint64(int64(key)))
	if err != nil {
		return nil, c.fail(err)
	}
	if color == Undefined {
		return nil, nil
	}
	type member struct{ key, rank int }
	var ms []member
	for r, v := range vals {
		if int(int64(v[1])) == color {
			ms = append(ms, member{int(int64(v[2])), r})
		}
	}
	sort.SliceStable(ms, func(i, j int) bool {
		if ms[i].key != ms[j].key {
			return ms[i].key < ms[j].key
		}
		return ms[i].rank < ms[j].rank
	})
	ranks := make([]int, len(ms))
	for i, m := range ms {
		ranks[i] = c.group.worldRank(m.rank)
	}
	d := newComm(c.p, newGroup(ranks, c.p.ep.Rank()), pair)
	d.errh.Store(c.errh.Load())
	return d, nil
}

// Create returns a communicator of the ranks of g, a subgroup of c's
// group, to those ranks, and nil to the others (MPI_COMM_CREATE). It is
// collective over c, and every rank must pass the same group. On an
// intercommunicator each group passes a subgroup of its own, and the
// result joins the two (nil everywhere if either is empty).
func (c *Comm) Create(g *Group) (*Comm, error) {
	if intercepted() {
		call := newCall(OpCreate, c)
		call.group = g
		return call.runComm()
	}
	return c.pCreate(g)
}

// CreateGroup returns a communicator of the ranks of g, a subgroup of
// c's group (MPI_COMM_CREATE_GROUP). Unlike Create, it is collective over
// g's ranks alone: the others need not call it. The ranks of g pass the
// same tag, and concurrent calls on overlapping groups of c pass
// different tags. A caller not in g gets nil, nil at once (a local call,
// as MPI has it); an intercommunicator, ErrComm.
func (c *Comm) CreateGroup(g *Group, tag int) (*Comm, error) {
	if intercepted() {
		call := newCall(OpCreateGroup, c)
		call.group, call.Tag = g, tag
		return call.runComm()
	}
	return c.pCreateGroup(g, tag)
}

// pCreateGroup is CreateGroup without interception.
func (c *Comm) pCreateGroup(g *Group, tag int) (*Comm, error) {
	const op = "CreateGroup"
	if err := c.check(op); err != nil {
		return nil, err
	}
	if c.IsInter() {
		return nil, c.fail(errorf(ErrComm, op, "an intercommunicator: CreateGroup makes intracommunicators"))
	}
	if g == nil {
		return nil, c.fail(errorf(ErrGroup, op, "nil group"))
	}
	if err := g.check(op); err != nil {
		return nil, c.fail(err)
	}
	for i := 0; i < g.Size(); i++ {
		if c.group.rankOf(g.worldRank(i)) == Undefined {
			return nil, c.fail(errorf(ErrGroup, op, "rank %d of the group is not in the communicator's group", i))
		}
	}
	if g.rankOf(c.p.ep.Rank()) == Undefined {
		return nil, nil // a local call, as MPI has it
	}
	ranks := g.worldRanks()
	// The agreement on a context runs among g's ranks alone, on a
	// context drawn from c's and the tag (as CommFromGroup's from its
	// tag), so that neither c's other ranks nor another call's group
	// take part.
	tmp := newComm(c.p, newGroup(ranks, c.p.ep.Rank()), createGroupPair(c.ctx, tag))
	pair, _, err := tmp.agreeContext(op)
	if err != nil {
		return nil, c.fail(err)
	}
	d := newComm(c.p, newGroup(ranks, c.p.ep.Rank()), pair)
	d.errh.Store(c.errh.Load())
	return d, nil
}

// createGroupPair is the context pair CreateGroup on the communicator of
// context ctx agrees on a context over for tag: above every pair
// agreeContext hands out, and apart from CommFromGroup's (tagPair).
func createGroupPair(ctx uint32, tag int) uint32 {
	h := uint32(2166136261) // FNV-1a over the context and the tag
	for _, b := range [...]uint64{uint64(ctx), uint64(tag)} {
		for i := 0; i < 8; i++ {
			h = (h ^ uint32(byte(b>>(8*i)))) * 16777619
		}
	}
	return 1<<30 | 1<<29 | h&(1<<28-1)
}

// pCreate is Create without interception.
func (c *Comm) pCreate(g *Group) (*Comm, error) {
	if err := c.check("Create"); err != nil {
		return nil, err
	}
	if g == nil {
		return nil, c.fail(errorf(ErrGroup, "Create", "nil group"))
	}
	if err := g.check("Create"); err != nil {
		return nil, c.fail(err)
	}
	for i := 0; i < g.Size(); i++ {
		if c.group.rankOf(g.worldRank(i)) == Undefined {
			return nil, c.fail(errorf(ErrGroup, "Create", "rank %d of the group is not in the communicator's (local) group", i))
		}
	}
	if c.IsInter() {
		d, err := c.interCreate("Create", g)
		return d, c.fail(err)
	}
	pair, _, err := c.agreeContext("Create")
	if err != nil {
		return nil, c.fail(err)
	}
	if g.rankOf(c.p.ep.Rank()) == Undefined {
		return nil, nil
	}
	ranks := make([]int, g.Size())
	for i := range ranks {
		ranks[i] = g.worldRank(i)
	}
	d := newComm(c.p, newGroup(ranks, c.p.ep.Rank()), pair)
	d.errh.Store(c.errh.Load())
	return d, nil
}

// Free releases c (MPI_COMM_FREE), deleting its attributes first (the
// last set first); afterwards its routines return ErrComm. A deleter's
// error is returned, but c is freed all the same. World and Self cannot
// be freed.
func (c *Comm) Free() error {
	if intercepted() {
		return newCall(OpCommFree, c).run()
	}
	return c.pFree()
}

// pFree is Free without interception.
func (c *Comm) pFree() error {
	if err := c.check("Free"); err != nil {
		return err
	}
	if c == c.p.world || c == c.p.self {
		return c.fail(errorf(ErrComm, "Free", "%s cannot be freed", c.label()))
	}
	err := c.clearAttrs("Free") // while c still works: a deleter may use it
	asm.StoreRelaxed32(&c.freed, 1)
	c.shmFree()
	c.freedInter()
	return c.fail(err)
}

// Compare reports how a and b relate (MPI_COMM_COMPARE): Ident for the
// same communicator, Congruent for the same group in the same order,
// Similar for the same ranks in another order, Unequal otherwise.
func Compare(a, b *Comm) (Comparison, error) {
	if err := a.check("Compare"); err != nil {
		return 0, err
	}
	if err := b.check("Compare"); err != nil {
		return 0, err
	}
	if a == b {
		return Ident, nil
	}
	if a.IsInter() || b.IsInter() {
		return compareInter(a, b)
	}
	r, err := GroupCompare(a.group, b.group)
	if err != nil {
		return 0, err
	}
	if r == Ident {
		return Congruent, nil
	}
	return r, nil
}

// worldOf returns the world rank of rank r of c (of its remote group,
// for an intercommunicator).
func (c *Comm) worldOf(r int) int {
	if c.worldC {
		return r
	}
	return c.peers.worldRank(r)
}

// commRank returns the rank in c (in its remote group, for an
// intercommunicator) of world rank w.
func (c *Comm) commRank(w int) int {
	if c.worldC {
		return w
	}
	return c.peers.rankOf(w)
}

// usual reports whether c may be used and peer and tag name a rank of c
// and a tag (no wildcard, no ProcNull): what the general checks would
// pass without a word. Receives and sends take it in line.
func (c *Comm) usual(peer, tag int) bool {
	return c != nil && !c.p.ended() && asm.LoadRelaxed32(&c.freed) == 0 && uint(peer) < uint(c.psize) && uint(tag) <= TagUB
}
