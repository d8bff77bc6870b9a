package engine

import (
	"fmt"
	"math"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tachyon-hpc/tachyon/progress"
	"github.com/tachyon-hpc/tachyon/pvar"
	"github.com/tachyon-hpc/tachyon/rings"
)

// Endpoint is one rank's view of a job: its links to every rank (itself
// included), its matching queues and its requests. All methods are safe
// for concurrent use; the progress engine polls it.
type Endpoint struct {
	_        cachePad // the rank's own lines: none shared with whatever lies next to it in memory
	lk       spinLock
	rank     int
	size     int
	prog     *progress.Engine
	peers    []peer
	m        matcher
	reqs     reqTable
	pool     bufPool
	attached attachedBuffer

	reader   remoteReader // nil: rendezvous always streams
	net      *netDev      // the network device, nil if no peer is on the network
	polls    uint64       // calls of pollLocked: a record link prefetches within a stream of sends only; the network keeper reads it unlocked
	warmAt   int          // the index in routs of the link warmNext looks at first
	closed   bool
	impaired bool          // closed, or a peer gone: what the usual cases of Irecv and IsendNow check
	inflight int           // requests started and not yet complete
	probing  int           // goroutines in Probe or BufferDetach
	outq     int           // peers with packets waiting for room
	idle     int64         // clock count of the last peer check while idle, 0 when busy
	checkD   time.Duration // engine_check_interval when checkC was computed
	checkC   uint64        // the same in clock counts
	onClose  []func()
	onAbort  func(code int)   // marks the job aborted where a launcher looks (a shared-memory job's segment); nil if none
	hostColl func() *HostColl // the host's collective areas (HostColl), nil if none
	failMu   sync.Mutex       // failed, against FailPeer from any goroutine; never the message path
	failed   map[int]error    // peers the layer above marked gone (FailPeer), and why
	failing  atomic.Bool      // failed is not empty: peer checks look at it
	shut     bool             // under failMu: Close has begun, FailPeer does nothing
	serial   bool             // no lock: one goroutine at a time (SetSerial)
	notify   bool             // requests completed: ring this engine's doorbell at unlock
	woken    []int32          // peers whose links got packets: wake them at unlock
	scan     []int            // the peers whose inboxes a poll reads in turn: all but the network's (pollNet's)
	routs    []int            // the peers whose links are record rings, which warmNext warms
	qpeers   []int32          // the peers queued (outq counts them), and some no longer: flushAll's to walk

	// Performance variable shards, owned by owner: this rank's values.
	owner     *pvar.Owner
	toolMu    sync.Mutex // tool reads of the queues and rings (vars.go) against Close; never the message path
	toolEnded bool       // under toolMu: Close has begun, the rings may be gone
	uqLevel   *pvar.LevelShard
	uqHWM     *pvar.WatermarkShard
	posted    *pvar.LevelShard
	postedHWM *pvar.WatermarkShard
	warmed    *pvar.CounterShard
	rndv      *pvar.CounterShard
	pipelined *pvar.CounterShard
	split     *pvar.CounterShard
	cancelled *pvar.CounterShard
	deaths    *pvar.CounterShard
	roomWaits *pvar.CounterShard
	malformed *pvar.CounterShard
	linkFull  *pvar.CounterShard
	_         cachePad
}

// cachePad keeps the state one goroutine writes on the message path off the
// cache lines of the objects beside it in memory: in a world of goroutine
// ranks those are other ranks', written from other cores, and a line both
// write moves between the cores at every write (false sharing).
type cachePad [64]byte

// peer is what an endpoint keeps per rank it talks to.
type peer struct {
	out    Link
	in     Inbox
	recs   *rings.RecordReader // in's reader when in is a record ring, read without the interface
	rout   *recordLink         // out when it is a record ring's writer
	ctl    []ctlPacket         // control packets waiting for room, in order
	sendq  reqQueue            // sends not yet fully pushed; only the head is under way
	dataq  reqQueue            // rendezvous sends streaming data after cts
	rx     rxState             // the eager message this peer is in the middle of
	dead   error               // non-nil once the peer is gone
	gone   atomic.Bool         // dead is set: what a HostWaiter reads without the lock
	count  transportShards     // its transport's counter shards
	short  int                 // the largest payload of a short packet on out
	eager  int                 // out's own eager limit, below engine_eager_limit's; 0: none
	sid    uint32              // the last short id given to a send to this peer, plus one (nextSID)
	held   int                 // packets handled but not yet released
	rndv   uint64              // the last rendezvous receive started from this peer
	queued bool                // counted in outq
	wake   bool                // in ep.woken
	inQ    bool                // in ep.qpeers
}

// rxState tracks an eager message whose fragments are still arriving.
type rxState struct {
	req   *Request    // matched receive, or
	uq    *unexpected // unexpected message being buffered
	off   int
	total int
}

type transportShards struct {
	msgs, bytes *pvar.CounterShard
}

// ctlPacket is a control packet waiting for room on its link.
type ctlPacket struct {
	typ, flags byte
	a, b       uint64
	c, d, e    uint64 // ctw: offset, length, address
	ctx        uint32
	tag        int32
	sid        uint32 // cancel: the short id of the message
}

// newEndpoint wires an endpoint to its links, one per rank, and registers
// it with its progress engine.
func newEndpoint(rank int, links []Link, inboxes []Inbox, counts []transportCounters, prog *progress.Engine, reader remoteReader) (*Endpoint, error) {
	size := len(links)
	for _, l := range links {
		if l.MaxPacket() < minPacket {
			return nil, fmt.Errorf("%w: links carry %d-byte packets, at least %d needed", ErrConfig, l.MaxPacket(), minPacket)
		}
	}
	o := prog.PvarOwner()
	ep := &Endpoint{rank: rank, size: size, prog: prog, m: newMatcher(), reader: reader, owner: o,
		uqLevel: pvUnexpected.ShardOf(o), uqHWM: pvUnexpectedHWM.ShardOf(o),
		posted: pvPosted.ShardOf(o), postedHWM: pvPostedHWM.ShardOf(o),
		warmed: pvWarmed.ShardOf(o), rndv: pvRndv.ShardOf(o), pipelined: pvPipelined.ShardOf(o),
		split: pvSplit.ShardOf(o), cancelled: pvCancelled.ShardOf(o), deaths: pvPeerDeaths.ShardOf(o),
		roomWaits: pvRoomWaits.ShardOf(o), malformed: pvMalformed.ShardOf(o), linkFull: pvLinkFull.ShardOf(o)}
	ep.m.depth, ep.m.searches, ep.m.depthHWM = pvMatchDepth.ShardOf(o), pvMatches.ShardOf(o), pvMatchDepthHWM.ShardOf(o)
	// One spare peer on each side: a peer is more than a line, so the
	// ones in use share no line with another rank's memory.
	ep.peers = make([]peer, size+2)[1 : size+1 : size+1]
	ep.woken = make([]int32, 0, size)
	ep.qpeers = make([]int32, 0, size)
	shards := map[transportCounters]transportShards{}
	for i := range ep.peers {
		s, ok := shards[counts[i]]
		if !ok {
			s = transportShards{msgs: counts[i].msgs.ShardOf(o), bytes: counts[i].bytes.ShardOf(o)}
			shards[counts[i]] = s
		}
		ep.peers[i] = peer{out: links[i], in: inboxes[i], count: s}
		if links[i] != nil {
			ep.peers[i].short = links[i].MaxPacket() - shortHeader
		}
		if _, ok := links[i].(*netConn); ok {
			p := &ep.peers[i]
			p.eager = int(netEagerLimit.Get())
			p.short = min(p.short, p.eager)
		}
		if in, ok := inboxes[i].(*recordInbox); ok {
			ep.peers[i].recs = in.r
		}
		if l, ok := links[i].(*recordLink); ok {
			l.polls = &ep.polls
			ep.peers[i].rout = l
			ep.routs = append(ep.routs, i)
		}
		if _, ok := inboxes[i].(*netConn); !ok {
			ep.scan = append(ep.scan, i)
		}
	}
	ep.onClose = append(ep.onClose, prog.Register(ep))
	live.Store(o, ep)
	return ep, nil
}

// Rank returns this endpoint's rank in the world.
func (ep *Endpoint) Rank() int { return ep.rank }

// Size returns the number of ranks in the world.
func (ep *Endpoint) Size() int { return ep.size }

// Progress returns the progress engine that drives this endpoint.
func (ep *Endpoint) Progress() *progress.Engine { return ep.prog }

// Wtime and Wtick are the progress clock's (MPID_Wtime, MPID_Wtick).
func Wtime() float64 { return progress.Wtime() }

// Wtick returns the resolution of Wtime in seconds.
func Wtick() float64 { return progress.Wtick() }

// Abort ends this process with code as its exit status, after marking
// the job aborted in its segment in a shared-memory job (ShmJobAborted):
// a launcher that sees a rank exit ends the others if it aborted,
// whatever the code, or if its status is not zero (MPID_Abort). It
// writes nothing: the caller says why first, where its user reads it
// (package mpi logs it through the session's log/slog logger).
func (ep *Endpoint) Abort(code int) {
	if ep.onAbort != nil {
		ep.onAbort(code)
	}
	os.Exit(code)
}

// checkDest returns an error unless dest is a rank of the world and tag a
// tag a send may carry.
func (ep *Endpoint) checkDest(dest, tag int) error {
	if uint(dest) < uint(ep.size) && uint(tag) <= math.MaxInt32 {
		return nil
	}
	return ep.destError(dest, tag)
}

// destError is checkDest's error, apart so that the check stays in line.
func (ep *Endpoint) destError(dest, tag int) error {
	if uint(dest) >= uint(ep.size) {
		return fmt.Errorf("%w: destination %d of a %d-rank world", ErrRank, dest, ep.size)
	}
	if tag < 0 || tag > math.MaxInt32 {
		return fmt.Errorf("%w: %d", ErrTag, tag)
	}
	return nil
}

// checkSource returns an error unless src is a rank of the world or
// AnySource, and tag a tag or AnyTag.
func (ep *Endpoint) checkSource(src, tag int) error {
	// AnySource and AnyTag are -1: one more than each is in range.
	if uint(src+1) <= uint(ep.size) && uint(tag+1) <= math.MaxInt32+1 {
		return nil
	}
	return ep.sourceError(src, tag)
}

// sourceError is checkSource's error, apart so that the check stays in
// line.
func (ep *Endpoint) sourceError(src, tag int) error {
	if src != AnySource && uint(src) >= uint(ep.size) {
		return fmt.Errorf("%w: source %d of a %d-rank world", ErrRank, src, ep.size)
	}
	if tag != AnyTag && (tag < 0 || tag > math.MaxInt32) {
		return fmt.Errorf("%w: %d", ErrTag, tag)
	}
	return nil
}

// Close ends the endpoint: pending operations fail with ErrClosed, peers
// see this rank gone once they have read what it sent, and the endpoint
// leaves its progress engine.
func (ep *Endpoint) Close() error {
	ep.failMu.Lock()
	ep.shut = true
	ep.failMu.Unlock()
	ep.lock()
	if ep.closed {
		ep.unlock()
		return ErrClosed
	}
	ep.closed, ep.impaired = true, true
	ep.failAll(func(*Request) bool { return true }, ErrClosed)
	ep.unlock()
	ep.endToolReads() // before the rings go
	for _, f := range ep.onClose {
		f()
	}
	ep.closeVars()
	return nil
}

// checkPeers looks for peers that died or left while operations wait,
// and fails the operations that can no longer finish.
func (ep *Endpoint) checkPeers() {
	for i := range ep.peers {
		p := &ep.peers[i]
		if i == ep.rank || p.dead != nil {
			continue
		}
		ep.releaseHeld(p) // what was read counts as read, and Peek starts after it
		err := ep.failedCause(i)
		if err == nil {
			err = p.in.Check()
		}
		if err == nil {
			if err = p.out.Check(); err == nil {
				continue
			}
		}
		// Gone, or going: read what it sent first. (A peer closes the
		// ring it sends on, then the one it reads: seen half-way, the
		// second can look closed while packets wait in the first.)
		if k, _ := p.in.Peek(1); k > 0 {
			p.in.Release(0) // only looked: the next poll reads it from the start
			continue
		}
		ep.peerGone(i, err)
	}
}

// peerGone fails every operation that needs peer i.
func (ep *Endpoint) peerGone(i int, cause error) {
	p := &ep.peers[i]
	p.dead = fmt.Errorf("%w: rank %d: %v", ErrPeerDead, i, cause)
	p.gone.Store(true)
	ep.impaired = true
	ep.deaths.Inc()
	if ep.probing > 0 && !ep.serial {
		ep.notify = true // a Probe may be waiting on this rank
	}
	if p.queued {
		p.queued = false
		ep.outq--
	}
	p.ctl = p.ctl[:0]
	p.sendq, p.dataq = reqQueue{}, reqQueue{}
	if ep.net != nil {
		if c := ep.net.conns[i]; c != nil {
			c.fail(ep.net.clock(), "%v", cause) // gone for whatever reason: nothing to linger for at close
		}
		ep.net.bulkGone(i)
	}
	if u := p.rx.uq; u != nil {
		ep.endPartial(u, p.dead)
	}
	p.rx = rxState{}
	allGone := true
	for j := range ep.peers {
		if j != ep.rank && ep.peers[j].dead == nil {
			allGone = false
		}
	}
	ep.failAll(func(r *Request) bool {
		if r.kind == kindSend {
			return r.peer == i
		}
		if r.state == stReceiving {
			return r.status.Source == i
		}
		return r.peer == i || r.peer == AnySource && allGone
	}, p.dead)
	// Unexpected messages from i that cannot be completed any more: each
	// message is in exactly one whole-context list.
	for k, l := range ep.m.uq {
		if k.src != AnySource || k.tag != AnyTag {
			continue
		}
		for u := l.head; u != nil; {
			next := u.links[byContext].next
			if int(u.src) == i && (u.kind == uqRTS || u.got < u.length) {
				ep.dropUnexpected(u)
			}
			u = next
		}
	}
}

// failAll completes every active request that sel picks with err.
func (ep *Endpoint) failAll(sel func(*Request) bool, err error) {
	for c := 0; c < ep.reqs.n; c++ {
		chunk := ep.reqs.chunks[c].Load()
		for j := range chunk {
			r := &chunk[j]
			if r.state == stFree || r.state == stDone || !sel(r) {
				continue
			}
			switch {
			case r.state == stPosted:
				ep.m.unpost(r)
				ep.posted.Sub(1)
			case r.uq != nil:
				r.uq.waiter = nil
			}
			for k := range ep.peers {
				ep.peers[k].sendq.remove(r)
				ep.peers[k].dataq.remove(r)
				if ep.peers[k].rx.req == r {
					ep.peers[k].rx = rxState{}
				}
			}
			r.cancelling = false
			ep.complete(r, err)
		}
	}
}

// dropUnexpected removes an unexpected message for good.
func (ep *Endpoint) dropUnexpected(u *unexpected) {
	if u.lists[byExact] != nil {
		ep.m.dequeue(u)
		ep.uqLevel.Sub(1)
	}
	ep.pool.put(u.data)
	ep.m.freeUnexpected(u)
}
