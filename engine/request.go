package engine

import (
	"fmt"
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

// reqQueue is a FIFO of send requests, linked through snext.
type reqQueue struct{ head, tail *Request }

// push appends r.
func (q *reqQueue) push(r *Request) {
	r.snext = nil
	if q.tail != nil {
		q.tail.snext = r
	} else {
		q.head = r
	}
	q.tail = r
}

// pop removes and returns the head, nil if the queue is empty.
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

// errTooManyRequests is the error of a request past the table's capacity.
func errTooManyRequests() error {
	return fmt.Errorf("%w: more than %d requests in flight", ErrRequest, tableChunks*chunkSize)
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

// completeSlow is complete's general case: an error, a release to run,
// a freed request to recycle, goroutines to wake.
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

// releaseLocked gives r back to the table (or, while a cancel is in
// flight, marks it to be given back when the answer comes). The
// endpoint's lock is held.
func (ep *Endpoint) releaseLocked(r *Request) {
	if r.cancelling {
		r.freed = true // recycled when the cancel answer comes
		return
	}
	ep.reqs.put(r)
}
