package engine

import "github.com/tachyon-hpc/tachyon/pvar"

// Matching keeps its cost flat however long the queues grow. A message is
// identified by (context, source, tag); a receive may leave the source or
// the tag open (AnySource, AnyTag).
//
// Posted receives sit in one FIFO list per key, their own (context,
// source-or-any, tag-or-any). An arriving message can match only the heads
// of four lists: exact, any tag, any source, any both. The earliest posted
// of those heads is the receive MPI's order requires; lists with wildcards
// are looked up only while wildcard receives are posted.
//
// A search's cost is the number of list heads it compares
// (engine_match_depth): at most four for an arriving message, one for a
// receive, whatever the queues' lengths.
//
// Unexpected messages sit in four FIFO lists at once: exact, same source
// (for AnyTag receives), same tag (for AnySource receives) and the whole
// context (for receives open in both). Each list is in arrival order, so
// the head of the one list a receive's key names is the earliest message
// it matches: no receive scans messages it cannot match.

// key names a list: a receive's (context, source, tag), with -1 for a
// wildcard.
type key struct {
	ctx uint32
	src int32
	tag int32
}

// reqList is a FIFO list of posted receives.
type reqList struct {
	head, tail *Request
}

func (l *reqList) push(r *Request) {
	r.list, r.qnext, r.qprev = l, nil, l.tail
	if l.tail != nil {
		l.tail.qnext = r
	} else {
		l.head = r
	}
	l.tail = r
}

func (l *reqList) remove(r *Request) {
	if r.qprev != nil {
		r.qprev.qnext = r.qnext
	} else {
		l.head = r.qnext
	}
	if r.qnext != nil {
		r.qnext.qprev = r.qprev
	} else {
		l.tail = r.qprev
	}
	r.list, r.qnext, r.qprev = nil, nil, nil
}

// Unexpected message kinds.
const (
	uqEager = iota + 1
	uqRTS
)

// unexpected is a message that arrived before its receive: an eager
// message's bytes (possibly still arriving), or a rendezvous announcement.
type unexpected struct {
	ctx       uint32
	src, tag  int32
	kind      uint8
	sync      bool
	short     bool   // sreq is a short id (a short packet)
	length    int    // whole message
	got       int    // eager bytes arrived so far
	data      []byte // eager bytes, from the endpoint's buffer pool
	sreq      uint64
	addr      uint64
	waiter    *Request // receive matched while bytes still arrive
	links     [4]uqLink
	lists     [4]*uqList
	freeNext  *unexpected
	cancelled bool

	// A message a matched probe took (mprobe.go) is in none of the four
	// lists above but in the matcher's list of those, through
	// links[byExact], until its receive. Both fit the padding above.
	held bool
	gen  uint32 // counts the probes that took this slot: a Message names one
}

type uqLink struct{ next, prev *unexpected }

type uqList struct{ head, tail *unexpected }

// The four lists an unexpected message is in.
const (
	byExact = iota
	bySource
	byTag
	byContext
)

func (l *uqList) push(u *unexpected, which int) {
	u.lists[which] = l
	u.links[which] = uqLink{prev: l.tail}
	if l.tail != nil {
		l.tail.links[which].next = u
	} else {
		l.head = u
	}
	l.tail = u
}

func (l *uqList) remove(u *unexpected, which int) {
	lk := u.links[which]
	if lk.prev != nil {
		lk.prev.links[which].next = lk.next
	} else {
		l.head = lk.next
	}
	if lk.next != nil {
		lk.next.links[which].prev = lk.prev
	} else {
		l.tail = lk.prev
	}
	u.links[which] = uqLink{}
	u.lists[which] = nil
}

// listCache remembers recently looked-up keys in front of a map, found or
// not: a direct-mapped table of 64 entries, so that traffic on a few keys
// (the common case) costs a multiply and a compare instead of a map
// lookup. Remembering absent keys matters as much: a message that a
// wildcard receive matches looks up its exact key, which has no list,
// every time. Whoever adds or removes a map entry tells the cache. In
// front of the table sits the entry used last: a window of messages on one
// key (the most common case of all) then costs a compare.
type listCache[L any] struct {
	last cacheEntry[L]
	ents [64]cacheEntry[L]
}

type cacheEntry[L any] struct {
	k     key
	l     *L // nil: k has no list
	known bool
}

func (k key) slot() uint32 {
	return (k.ctx*0x9E3779B1 ^ uint32(k.src)*0x85EBCA6B ^ uint32(k.tag)*0xC2B2AE35) >> 26
}

// get returns m[k], from the cache if it knows k.
func (c *listCache[L]) get(m map[key]*L, k key) *L {
	if c.last.k == k && c.last.known {
		return c.last.l
	}
	e := &c.ents[k.slot()]
	if !e.known || e.k != k {
		e.k, e.l, e.known = k, m[k], true
	}
	c.last = *e
	return e.l
}

// set records that m[k] is now l (nil: k left the map).
func (c *listCache[L]) set(k key, l *L) {
	e := &c.ents[k.slot()]
	e.k, e.l, e.known = k, l, true
	if c.last.k == k {
		c.last = *e
	}
}

// matcher holds one endpoint's posted and unexpected queues.
type matcher struct {
	pcache   listCache[reqList]
	ucache   listCache[uqList]
	posted   map[key]*reqList
	nposted  int
	nwild    int // posted receives with a wildcard
	postSeq  uint64
	uq       map[key]*uqList
	nuq      int
	uqFree   *unexpected
	held     *unexpected           // messages matched by a probe and not yet received (mprobe.go)
	heldErrs map[*unexpected]error // of those, the ones whose data will never come, and why
	spare    []*reqList
	uqSpare  []*uqList
	maxLists int

	// List heads compared per match (engine_match_depth,
	// engine_match_depth_hwm) and matches searched (engine_matches).
	depth, searches *pvar.CounterShard
	depthHWM        *pvar.WatermarkShard
}

// searched records a search that compared n list heads.
func (m *matcher) searched(n int) {
	m.searches.Inc()
	m.depth.Add(uint64(n))
	m.depthHWM.Observe(int64(n))
}

func newMatcher() matcher {
	return matcher{posted: make(map[key]*reqList), uq: make(map[key]*uqList), maxLists: 1 << 12}
}

func recvKey(ctx uint32, src, tag int) key { return key{ctx, int32(src), int32(tag)} }

// post appends a receive to the posted queue.
func (m *matcher) post(r *Request) {
	k := recvKey(r.ctx, r.peer, r.tag)
	l := m.pcache.get(m.posted, k)
	if l == nil {
		if n := len(m.spare); n > 0 {
			l, m.spare = m.spare[n-1], m.spare[:n-1]
		} else {
			l = new(reqList)
		}
		m.posted[k] = l
		m.pcache.set(k, l)
	}
	m.postSeq++
	r.seq = m.postSeq
	l.push(r)
	m.nposted++
	if r.peer == AnySource || r.tag == AnyTag {
		m.nwild++
	}
}

// unpost removes a posted receive (matched or cancelled).
func (m *matcher) unpost(r *Request) {
	l := r.list
	l.remove(r)
	m.nposted--
	if r.peer == AnySource || r.tag == AnyTag {
		m.nwild--
	}
	if l.head == nil && len(m.posted) > m.maxLists {
		m.unlist(l, r)
	}
}

// unlist drops l, the empty list of r's key, to keep the map small.
func (m *matcher) unlist(l *reqList, r *Request) {
	k := recvKey(r.ctx, r.peer, r.tag)
	delete(m.posted, k)
	m.pcache.set(k, nil)
	m.spare = append(m.spare, l)
}

// matchPosted finds, and removes, the earliest posted receive matching a
// message; nil if none.
func (m *matcher) matchPosted(ctx uint32, src, tag int32) *Request {
	if m.nposted == 0 {
		return nil
	}
	var best *Request
	n := 0
	if l := m.pcache.get(m.posted, key{ctx, src, tag}); l != nil && l.head != nil {
		best, n = l.head, 1
	}
	if m.nwild > 0 {
		for _, k := range [3]key{{ctx, src, AnyTag}, {ctx, AnySource, tag}, {ctx, AnySource, AnyTag}} {
			if l := m.pcache.get(m.posted, k); l != nil && l.head != nil {
				n++
				if best == nil || l.head.seq < best.seq {
					best = l.head
				}
			}
		}
	}
	m.searched(n)
	if best != nil {
		m.unpost(best)
	}
	return best
}

// findUnexpected returns the earliest unexpected message a receive (or
// probe) of (ctx, src, tag) matches, nil if none; it stays queued.
func (m *matcher) findUnexpected(ctx uint32, src, tag int) *unexpected {
	if m.nuq == 0 {
		return nil
	}
	// A receive's key, wildcards included, names exactly one of the four
	// lists every message is in.
	if l := m.ucache.get(m.uq, recvKey(ctx, src, tag)); l != nil && l.head != nil {
		m.searched(1)
		return l.head
	}
	m.searched(0)
	return nil
}

// uqKeys returns the keys of the four lists a message is in.
func uqKeys(ctx uint32, src, tag int32) [4]key {
	return [4]key{{ctx, src, tag}, {ctx, src, AnyTag}, {ctx, AnySource, tag}, {ctx, AnySource, AnyTag}}
}

// newUnexpected queues a message that matched no posted receive.
func (m *matcher) newUnexpected(ctx uint32, src, tag int32) *unexpected {
	u := m.uqFree
	if u != nil {
		m.uqFree = u.freeNext
		*u = unexpected{gen: u.gen} // a Message naming the slot's last use stays stale
	} else {
		u = new(unexpected)
	}
	u.ctx, u.src, u.tag = ctx, src, tag
	for which, k := range uqKeys(ctx, src, tag) {
		l := m.ucache.get(m.uq, k)
		if l == nil {
			if n := len(m.uqSpare); n > 0 {
				l, m.uqSpare = m.uqSpare[n-1], m.uqSpare[:n-1]
			} else {
				l = new(uqList)
			}
			m.uq[k] = l
			m.ucache.set(k, l)
		}
		l.push(u, which)
	}
	m.nuq++
	return u
}

// dequeue removes an unexpected message from its lists (it matched, or
// was cancelled); its memory is recycled by freeUnexpected.
func (m *matcher) dequeue(u *unexpected) {
	for which, k := range uqKeys(u.ctx, u.src, u.tag) {
		l := u.lists[which]
		l.remove(u, which)
		if l.head == nil && len(m.uq) > m.maxLists {
			delete(m.uq, k)
			m.ucache.set(k, nil)
			m.uqSpare = append(m.uqSpare, l)
		}
	}
	m.nuq--
}

func (m *matcher) freeUnexpected(u *unexpected) {
	*u = unexpected{freeNext: m.uqFree, gen: u.gen}
	m.uqFree = u
}
