package engine

import (
	"errors"
	"fmt"
	"math"
	"os"
	"time"

	"github.com/tachyon-hpc/tachyon/asm"
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
	warmAt   int          // the peer whose link warmNext looks at first
	node     string
	closed   bool
	impaired bool          // closed, or a peer gone: what the usual cases of Irecv and IsendNow check
	inflight int           // requests started and not yet complete
	probing  int           // goroutines in Probe or BufferDetach
	outq     int           // peers with packets waiting for room
	idle     int64         // clock count of the last peer check while idle, 0 when busy
	checkD   time.Duration // engine_check_interval when checkC was computed
	checkC   uint64        // the same in clock counts
	onClose  []func()
	onAbort  func(code int) // marks the job aborted where a launcher looks (a shared-memory job's segment); nil if none
	serial   bool           // no lock: one goroutine at a time (SetSerial)
	notify   bool           // requests completed: ring this engine's doorbell at unlock
	woken    []int32        // peers whose links got packets: wake them at unlock

	uqLevel *pvar.LevelShard
	uqHWM   *pvar.WatermarkShard
	posted  *pvar.LevelShard
	warmed  *pvar.CounterShard
	_       cachePad
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
	count  transportShards     // its transport's counter shards
	short  int                 // the largest payload of a short packet on out
	sid    uint32              // the last short id given to a send to this peer, plus one (nextSID)
	held   int                 // packets handled but not yet released
	rndv   uint64              // the last rendezvous receive started from this peer
	queued bool                // counted in outq
	wake   bool                // in ep.woken
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

// reqQueue is a FIFO of send requests, linked through snext.
type reqQueue struct{ head, tail *Request }

func (q *reqQueue) push(r *Request) {
	r.snext = nil
	if q.tail != nil {
		q.tail.snext = r
	} else {
		q.head = r
	}
	q.tail = r
}

func (q *reqQueue) pop() *Request {
	r := q.head
	if r != nil {
		q.head = r.snext
		if q.head == nil {
			q.tail = nil
		}
		r.snext = nil
	}
	return r
}

// remove unlinks r from q if it is there.
func (q *reqQueue) remove(r *Request) bool {
	var prev *Request
	for x := q.head; x != nil; prev, x = x, x.snext {
		if x != r {
			continue
		}
		if prev == nil {
			q.head = x.snext
		} else {
			prev.snext = x.snext
		}
		if q.tail == x {
			q.tail = prev
		}
		x.snext = nil
		return true
	}
	return false
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
	ep := &Endpoint{rank: rank, size: size, prog: prog, m: newMatcher(), reader: reader,
		uqLevel: pvUnexpected.Shard(), uqHWM: pvUnexpectedHWM.Shard(), posted: pvPosted.Shard(),
		warmed: pvWarmed.Shard()}
	ep.node, _ = os.Hostname()
	// One spare peer on each side: a peer is more than a line, so the
	// ones in use share no line with another rank's memory.
	ep.peers = make([]peer, size+2)[1 : size+1 : size+1]
	ep.woken = make([]int32, 0, size)
	shards := map[transportCounters]transportShards{}
	for i := range ep.peers {
		s, ok := shards[counts[i]]
		if !ok {
			s = transportShards{msgs: counts[i].msgs.Shard(), bytes: counts[i].bytes.Shard()}
			shards[counts[i]] = s
		}
		ep.peers[i] = peer{out: links[i], in: inboxes[i], count: s}
		if links[i] != nil {
			ep.peers[i].short = links[i].MaxPacket() - shortHeader
		}
		if in, ok := inboxes[i].(*recordInbox); ok {
			ep.peers[i].recs = in.r
		}
		if l, ok := links[i].(*recordLink); ok {
			l.polls = &ep.polls
			ep.peers[i].rout = l
		}
	}
	ep.onClose = append(ep.onClose, prog.Register(ep))
	return ep, nil
}

// Rank returns this endpoint's rank in the world.
func (ep *Endpoint) Rank() int { return ep.rank }

// Size returns the number of ranks in the world.
func (ep *Endpoint) Size() int { return ep.size }

// NodeName returns the name of the host this rank runs on.
func (ep *Endpoint) NodeName() string { return ep.node }

// Progress returns the progress engine that drives this endpoint.
func (ep *Endpoint) Progress() *progress.Engine { return ep.prog }

// Wtime and Wtick are the progress clock's (MPID_Wtime, MPID_Wtick).
func Wtime() float64 { return progress.Wtime() }

// Wtick returns the resolution of Wtime in seconds.
func Wtick() float64 { return progress.Wtick() }

// Abort ends this process with code as its exit status, after printing
// msg and, in a shared-memory job, marking the job aborted in its segment
// (ShmJobAborted): a launcher that sees a rank exit ends the others if it
// aborted, whatever the code, or if its status is not zero (MPID_Abort).
func (ep *Endpoint) Abort(code int, msg string) {
	if msg == "" {
		msg = "aborted"
	}
	if ep.onAbort != nil {
		ep.onAbort(code)
	}
	fmt.Fprintf(os.Stderr, "tachyon: rank %d: %s (exit status %d)\n", ep.rank, msg, code)
	os.Exit(code)
}

// Poll is the endpoint's Poller: it drains every inbox, then pushes what
// waits for room on the links. A goroutine posting an operation holds the
// endpoint for a moment; Poll then returns at once, and the next one
// catches up.
func (ep *Endpoint) Poll() int {
	if !ep.tryLock() {
		return 0
	}
	n := ep.pollLocked()
	ep.unlock()
	return n
}

// pollLocked takes in what every peer sent. The packets it handles are
// released (their ring space zeroed and given back) only at the next poll
// of their peer: released at once, the zeroing's stores sit in the store
// buffer ahead of those of an answer the handling leads to (a ping-pong's
// echo), and the answer leaves later (8 KiB latency 2.19-2.23 against
// 2.25-2.44 µs, the 4-8 KiB message rate 3-5% higher, in alternating runs
// of go run ./bench -format anchor -max 16384). Large packets with more
// behind them are the exception (pollLarge).
//
// It stays out of line: a profile that inlined it into Poll left the
// reader's Next and handle out of line instead (the 8 B rate loop's
// receiving rank 539 against 516 instructions a message under callgrind).
//
//go:noinline
func (ep *Endpoint) pollLocked() int {
	asm.StoreRelaxed64(&ep.polls, ep.polls+1) // relaxed: a network keeper reads it unlocked
	n := 0
	if ep.net != nil {
		n = ep.net.pump()
	}
	batch, large := int(pollBatch.Get()), largePacket()
	for i := range ep.peers {
		p := &ep.peers[i]
		ep.releaseHeld(p)
		var k, base int
		var err error
		if rd := p.recs; rd != nil {
			// One record at a time: handled while the writer still
			// writes the next (rings.RecordReader.Next).
			for { // Next stops at batch: nothing is released here
				var pkt []byte
				if ep.serial {
					k, pkt = ep.pollShort(i, rd, k, batch)
				}
				if pkt == nil {
					var e error
					if pkt, e = rd.Next(batch); pkt == nil {
						if e != nil && !errors.Is(e, rings.ErrClosed) {
							err = e // ErrClosed: this rank closed the inbox; nothing malformed
						}
						break
					}
				}
				if len(pkt) >= large {
					k, base, err = ep.pollLarge(i, rd, pkt, k, batch, large)
					break
				}
				ep.handle(i, pkt)
				k++
			}
			if k > base {
				p.held = k - base
			}
			n += k
		} else {
			k, err = p.in.Peek(batch)
			for j := 0; j < k; j++ {
				ep.handle(i, p.in.Packet(j))
			}
			if k > 0 {
				p.held = k
				n += k
			}
		}
		if err != nil {
			pvMalformed.Add(1)
		}
	}
	if n == 0 {
		ep.warmNext()
	}
	if ep.outq > 0 {
		n += ep.flushAll()
	}
	if ep.net != nil {
		if ep.net.bulk != nil && ep.net.bulk.active > 0 {
			n += ep.pollBulk()
		}
		ep.net.service()
	}
	if n > 0 || ep.inflight == 0 && ep.probing == 0 {
		ep.idle = 0
		return n
	}
	// Nothing to do: the progress engine's recent clock reading says
	// whether to look at the peers' health.
	now := ep.prog.Coarse()
	if ep.idle == 0 {
		ep.idle = int64(now)
		return 0
	}
	if now-uint64(ep.idle) >= ep.checkCounts() {
		ep.idle = int64(now)
		ep.checkPeers()
	}
	return 0
}

// pollLarge is pollLocked's loop over peer i's record ring from a large
// packet on, the k+1st of the poll (engine_poll_release_bytes): when
// another packet is ready behind a large one, what was handled is given
// back at once, so that the writer refills it while the next is copied
// out; the last waits for the next poll, off an answer's path. It returns
// the packets handled and how many of them it gave back, and the error of
// a malformed record. Out of line, so that the loop of small packets
// keeps its registers.
func (ep *Endpoint) pollLarge(i int, rd *rings.RecordReader, pkt []byte, k, batch, large int) (int, int, error) {
	base := 0
	for {
		ep.handle(i, pkt)
		if k++; k >= batch {
			return k, base, nil
		}
		if len(pkt) >= large && rd.Ready() {
			rd.Release(k - base)
			base = k
			ep.peers[i].roomFreed()
		}
		var e error
		if pkt, e = rd.Next(batch); pkt == nil {
			if e != nil && !errors.Is(e, rings.ErrClosed) {
				return k, base, e
			}
			return k, base, nil
		}
	}
}

// largePacket returns engine_poll_release_bytes, with 0 (never) as the
// largest int.
func largePacket() int {
	if b := int(pollRelease.Get()); b > 0 {
		return b
	}
	return math.MaxInt
}

// warmNext warms one record link that streamed recently, the next after
// the one it warmed last (recordLink.warm): one a poll, so that a rank
// that streamed to many peers does not make every poll of its wait that
// many times longer.
func (ep *Endpoint) warmNext() {
	for k := range ep.peers {
		i := ep.warmAt + k
		if i >= len(ep.peers) {
			i -= len(ep.peers)
		}
		if l := ep.peers[i].rout; l != nil && l.streamed {
			if c := l.warm(ep.polls); c > 0 {
				ep.warmed.Add(uint64(c))
				ep.warmAt = i + 1
				if ep.warmAt == len(ep.peers) {
					ep.warmAt = 0
				}
				return
			}
		}
	}
}

// checkCounts returns engine_check_interval in clock counts, converted
// once per value of the variable rather than at every empty poll.
func (ep *Endpoint) checkCounts() uint64 {
	if d := checkInterval.Get(); d != ep.checkD {
		ep.checkD, ep.checkC = d, progress.SecondsToCounts(d.Seconds())
	}
	return ep.checkC
}

// releaseHeld releases the packets of p that the last poll handled.
func (ep *Endpoint) releaseHeld(p *peer) {
	if p.held > 0 {
		p.in.Release(p.held)
		p.held = 0
		p.roomFreed()
	}
}

// roomFreed wakes p's rank, after a Release of its packets, if it parked
// waiting for room on its link to this rank (Link.WantRoom, BeforePark).
// Nothing else would: a writer waiting for room gets no packet from the
// reader, and before this it slept until progress_park_max: a window of
// 64 16 KiB messages then took 21-24 ms where it takes 40-60 µs, once the
// receiver had paused long enough for the sender to park.
func (p *peer) roomFreed() {
	progress.WakeFence() // the Release before the check (Inbox.RoomWanted)
	if rd := p.recs; rd != nil {
		if !rd.RoomWanted() {
			return
		}
	} else if !p.in.RoomWanted() {
		return
	}
	p.out.Wake()
	pvRoomWakes.Add(1)
}

// NextDue is the endpoint's progress.Deadliner: a rank with peers on the
// network must look at its link again by the device's next timer, and
// within engine_net_poll_max, since no doorbell announces a frame.
func (ep *Endpoint) NextDue() (uint64, bool) {
	if ep.net == nil {
		return 0, false
	}
	return ep.net.nextDue()
}

// BeforePark is the endpoint's progress.Parker: before a goroutine parks,
// every link with packets waiting for room asks its reader to wake this
// rank once it frees some (Link.WantRoom).
func (ep *Endpoint) BeforePark() {
	ep.lock()
	if ep.outq > 0 && !ep.closed {
		for i := range ep.peers {
			if p := &ep.peers[i]; p.queued && p.dead == nil {
				p.out.WantRoom()
				pvRoomWaits.Add(1)
			}
		}
	}
	ep.unlock()
}

// checkDest returns an error unless dest is a rank of the world and tag a
// tag a send may carry.
func (ep *Endpoint) checkDest(dest, tag int) error {
	if uint(dest) < uint(ep.size) && uint(tag) <= math.MaxInt32 {
		return nil
	}
	return ep.destError(dest, tag)
}

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

func (ep *Endpoint) sourceError(src, tag int) error {
	if src != AnySource && uint(src) >= uint(ep.size) {
		return fmt.Errorf("%w: source %d of a %d-rank world", ErrRank, src, ep.size)
	}
	if tag != AnyTag && (tag < 0 || tag > math.MaxInt32) {
		return fmt.Errorf("%w: %d", ErrTag, tag)
	}
	return nil
}

// complete finishes r: its status and error are final.
func (ep *Endpoint) complete(r *Request, err error) {
	if r.state == stDone {
		return
	}
	if err == nil && r.release == nil && !r.freed && ep.serial {
		// The usual case, in line: nothing to give back, no one to wake.
		r.state = stDone
		ep.inflight--
		r.Completion.MarkDoneLocal() // serial: no one else looks
		return
	}
	ep.completeSlow(r, err)
}

func (ep *Endpoint) completeSlow(r *Request, err error) {
	if r.err == nil {
		r.err = err
	}
	r.state = stDone
	ep.inflight--
	if r.release != nil {
		r.release()
		r.release = nil
	}
	r.Completion.MarkDone()
	if !ep.serial {
		ep.notify = true
	}
	if r.freed && !r.cancelling {
		ep.reqs.put(r)
	}
}

// newRequest takes a request from the pool.
func (ep *Endpoint) newRequest(kind reqKind, buf []byte, peer, tag int, ctx uint32) (*Request, error) {
	r, ok := ep.reqs.get(ep)
	if !ok {
		return nil, errTooManyRequests()
	}
	r.kind, r.buf, r.peer, r.tag, r.ctx = kind, buf, peer, tag, ctx
	r.Completion.Rearm()
	ep.inflight++
	return r, nil
}

func errTooManyRequests() error {
	return fmt.Errorf("%w: more than %d requests in flight", ErrRequest, tableChunks*chunkSize)
}

// Wait waits for r to complete and returns its status and error; r goes
// back to the pool.
func (r *Request) Wait() (Status, error) {
	ep := r.ep
	if !r.Completion.Done() {
		ep.prog.Wait(&r.Completion)
	}
	if ep.serial && !r.cancelling {
		// Serial, nothing to take or to wake: the usual case, in line.
		st, err := r.status, r.err
		ep.reqs.put(r)
		return st, err
	}
	ep.lock()
	st, err := r.status, r.err
	ep.releaseLocked(r)
	ep.unlock()
	return st, err
}

// WaitErr is Wait for a caller that does not want the status: it returns
// the request's error alone, and r goes back to the pool. Returning one
// word instead of a Status and an error spares the usual case of a
// receive waited in a batch (mpi.WaitallInto) the status's copies.
func (r *Request) WaitErr() error {
	ep := r.ep
	if !r.Completion.Done() {
		ep.prog.Wait(&r.Completion)
	}
	if ep.serial && !r.cancelling {
		err := r.err
		ep.reqs.put(r)
		return err
	}
	ep.lock()
	err := r.err
	ep.releaseLocked(r)
	ep.unlock()
	return err
}

// Collect gives r back to the pool and reports true if r has completed
// without error and nothing else is owed for it (the endpoint is serial
// and no cancel is out): WaitErr's usual case. Otherwise it reports false
// and leaves r as it was, for Wait or WaitErr. It makes no call, so that
// a loop collecting a window of requests (mpi.WaitallInto) keeps its
// values in registers.
func (r *Request) Collect() bool {
	ep := r.ep
	if !r.Completion.Done() || !ep.serial || r.cancelling || r.err != nil {
		return false
	}
	ep.reqs.put(r)
	return true
}

// Test reports whether r has completed, driving progress once if not. If
// it has, r goes back to the pool as after Wait.
func (r *Request) Test() (Status, bool, error) {
	ep := r.ep
	if !ep.prog.Test(&r.Completion) {
		return Status{}, false, nil
	}
	ep.lock()
	st, err := r.status, r.err
	ep.releaseLocked(r)
	ep.unlock()
	return st, true, err
}

// Done reports whether r has completed, without driving progress.
func (r *Request) Done() bool { return r.Completion.Done() }

// Free gives r back: if it is still active it goes on, and is recycled
// once complete (MPI_REQUEST_FREE).
func (r *Request) Free() {
	ep := r.ep
	ep.lock()
	if r.state == stDone {
		ep.releaseLocked(r)
	} else {
		r.freed = true
	}
	ep.unlock()
}

func (ep *Endpoint) releaseLocked(r *Request) {
	if r.cancelling {
		r.freed = true // recycled when the cancel answer comes
		return
	}
	ep.reqs.put(r)
}

// Close ends the endpoint: pending operations fail with ErrClosed, peers
// see this rank gone once they have read what it sent, and the endpoint
// leaves its progress engine.
func (ep *Endpoint) Close() error {
	ep.lock()
	if ep.closed {
		ep.unlock()
		return ErrClosed
	}
	ep.closed, ep.impaired = true, true
	ep.failAll(func(*Request) bool { return true }, ErrClosed)
	ep.unlock()
	for _, f := range ep.onClose {
		f()
	}
	ep.uqLevel.Close()
	ep.posted.Close()
	ep.uqHWM.Close()
	ep.warmed.Close()
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
		err := p.in.Check()
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
	ep.impaired = true
	pvPeerDeaths.Add(1)
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
		ep.net.bulkGone(i)
	}
	if u := p.rx.uq; u != nil {
		ep.dropUnexpected(u)
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
