package engine

import (
	"sync/atomic"

	"github.com/tachyon-hpc/tachyon/progress"
)

// Mode is a send mode (MPI's standard, synchronous, ready and buffered).
type Mode uint8

// Send modes.
const (
	Standard    Mode = iota // complete once the buffer may be reused
	Synchronous             // complete once the matching receive has started
	Ready                   // the receive is known to be posted: sent as Standard
	Buffered                // copied into the attached buffer at once
)

// Wildcards of receives and probes.
const (
	AnySource = -1
	AnyTag    = -1
)

// Status describes a completed receive, probe or request.
type Status struct {
	Source    int  // world rank of the sender
	Tag       int  // tag of the message
	Count     int  // bytes received, or that a probe found
	Cancelled bool // the request was cancelled
}

type reqKind uint8

const (
	kindSend reqKind = iota + 1
	kindRecv
)

// Request states.
type reqState uint8

const (
	stFree      reqState = iota // in the pool
	stQueued                    // send: in its peer's send queue, nothing pushed yet
	stPushing                   // send: first packet pushed, fragments remain
	stAwaitFin                  // send: pushed; waits for fin (sync eager, cma rendezvous) or cts
	stStreaming                 // send: cts came; data packets being pushed
	stPosted                    // recv: in the posted queue
	stReceiving                 // recv: matched; data still arriving
	stDone                      // complete: status and err are final
)

// splitState is where a split rendezvous receive stands.
type splitState uint8

const (
	splitNone    splitState = iota
	splitWaiting            // the receiver has read its part; the sender's written is due
	splitDropped            // streamed instead: the written still due is ignored
)

// Request is one nonblocking operation of an endpoint. It is owned by the
// endpoint's pool: after Wait or Test reports it complete, or after Free,
// the caller must not touch it again.
type Request struct {
	reqSlot
	reqOp
}

// reqSlot is what a request keeps across its reuse: its place in the
// table and what the layer above stored there.
type reqSlot struct {
	ep       *Endpoint
	id       uint64   // table index | generation<<32
	owner    any      // the layer above's object for this slot (Owner)
	nextFree *Request // in the pool: the next free request
}

// reqOp is the state of one operation, zeroed when the request goes back
// to the pool. It is kept in two parts, each small enough that the
// compiler zeroes it with straight-line stores (the whole, 224 bytes,
// took a loop: 8 more instructions on every receive of a window;
// TestReqOpZeroedInLine holds the bound).
type reqOp struct {
	reqMatch
	reqProto
}

// reqMatch is the part of reqOp a short message's receive uses: what the
// operation is, its buffer and key, its outcome, and its place among
// posted receives.
type reqMatch struct {
	progress.Completion
	kind  reqKind
	mode  Mode
	state reqState
	buf   []byte
	peer  int // send: destination; recv: source or AnySource
	tag   int
	ctx   uint32

	// Read on a short message's way too (pollShort, Collect): here, in
	// the padding after ctx, not on a line of their own in reqProto.
	cancelling bool // send: a cancel packet is out
	freed      bool // the user freed it: release once complete

	status Status
	err    error

	// Posted receives: their bucket's list, and the order of posting.
	qnext, qprev *Request
	list         *reqList
	seq          uint64
}

// reqProto is the rest of reqOp: the state of the protocols past a short
// packet (send queues, rendezvous, cancel, buffered sends).
type reqProto struct {
	// Sends: the peer queue they wait in, and how far they got.
	snext *Request
	sent  int    // send: bytes pushed; recv: bytes stored
	total int    // rendezvous recv: the whole message's length
	got   int    // rendezvous recv: data bytes arrived
	rreq  uint64 // send: the receiver's request (cts, ctw); split recv: the sender's

	splitAt int    // split rendezvous recv (ctw): the sender writes from here on
	saddr   uint64 // split rendezvous recv: the sender's buffer

	sid     uint32      // send: the short id of its short packet, 0 if none
	uq      *unexpected // recv: the unexpected message it waits on
	finned  bool        // synchronous eager send: fin came before its last packet left
	split   splitState  // split rendezvous recv
	bulk    bool        // rendezvous recv: its data was asked for over the bulk lane (netbulk.go)
	release func()      // buffered sends: give the space back
}

// Status returns the status of a completed request.
func (r *Request) Status() Status { return r.status }

// Err returns the error of a completed request, nil if it succeeded.
func (r *Request) Err() error { return r.err }

// Owner returns what SetOwner last stored in r's slot of the pool, nil if
// nothing. Unlike every other field it survives the request's return to
// the pool, so that the layer above can keep one object of its own per
// slot, found again when the slot is reused, instead of a pool beside the
// engine's. The engine never reads it.
func (r *Request) Owner() any { return r.owner }

// SetOwner stores v in r's slot of the pool (see Owner). Only the holder
// of a request may call it, before the request is given back.
func (r *Request) SetOwner(v any) { r.owner = v }

// reqTable maps request ids to requests for packets that name them (fin,
// cts, data, cancel). It grows by chunks that never move, so a transport
// in the same process may look a request up while the table grows.
type reqTable struct {
	chunks [tableChunks]atomic.Pointer[[chunkSize]Request]
	n      int      // chunks in use
	free   *Request // the pool, linked through nextFree: taking and giving back never allocate
}

const (
	chunkBits   = 10
	chunkSize   = 1 << chunkBits
	tableChunks = 1 << 12 // up to four million requests in flight
)

// get takes a request from the pool, growing the table if needed.
func (t *reqTable) get(ep *Endpoint) (*Request, bool) {
	r := t.free
	if r == nil {
		return t.grow(ep)
	}
	t.free = r.nextFree
	return r, true
}

// grow adds a chunk of requests to the pool and takes one, or reports
// false if the table is full.
func (t *reqTable) grow(ep *Endpoint) (*Request, bool) {
	if t.n == tableChunks {
		return nil, false
	}
	c := new([chunkSize]Request)
	base := uint64(t.n) << chunkBits
	for i := range c {
		c[i].id = base + uint64(i) | 1<<32 // generation 1
		c[i].ep = ep
	}
	t.chunks[t.n].Store(c)
	t.n++
	first := 0
	if base == 0 {
		first = 1 // index 0 unused: no id is 0, whatever the generation
	}
	for i := chunkSize - 1; i >= first; i-- {
		c[i].nextFree = t.free
		t.free = &c[i]
	}
	return t.get(ep)
}

// put returns r to the pool with a new generation, so that packets naming
// its old id no longer find it. The generation may wrap to 0; an id stays
// nonzero because the table's index 0 is never used (grow).
func (t *reqTable) put(r *Request) {
	r.id += 1 << 32
	r.reqMatch = reqMatch{} // in two parts: see reqOp
	r.reqProto = reqProto{}
	r.nextFree = t.free
	t.free = r
}

// lookup returns the live request with id, or nil.
func (t *reqTable) lookup(id uint64) *Request {
	idx := id & (1<<32 - 1)
	ci := idx >> chunkBits
	if ci >= tableChunks {
		return nil
	}
	c := t.chunks[ci].Load()
	if c == nil {
		return nil
	}
	r := &c[idx&(chunkSize-1)]
	if r.id != id || r.state == stFree {
		return nil
	}
	return r
}

// peerLookup returns the request with id for a reader in another
// goroutine (an in-process rendezvous): it reads only fields the owner set
// before it published the packet naming id.
func (t *reqTable) peerLookup(id uint64) *Request {
	idx := id & (1<<32 - 1)
	if idx>>chunkBits >= tableChunks {
		return nil
	}
	c := t.chunks[idx>>chunkBits].Load()
	if c == nil || c[idx&(chunkSize-1)].id != id {
		return nil
	}
	return &c[idx&(chunkSize-1)]
}
