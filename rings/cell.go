package rings

import (
	"sync/atomic"
	"unsafe"

	"github.com/tachyon-hpc/tachyon/asm"
)

// Flow of one message through a cell ring (the per-pair "fast box"):
//
//  1. The producer checks its cached copy of the consumer's head; only if
//     the ring looks full does it reread the shared head.
//  2. It copies the payload into the cell at its tail, then stores the
//     cell's header word {length, stamp = position+1} with a release
//     store: payload and stamp travel to the consumer in one cache line.
//  3. The consumer polls the stamp of the cell at its head with an acquire
//     load; when it matches, the payload is complete.
//  4. The consumer copies (or hands out) the payload, then publishes its
//     new head with a release store, freeing the cell.
//
// The consumer never reads the producer's tail: the stamp in the cell it
// must fetch anyway is its copy of the producer's index, so a message costs
// one cache-line transfer, the floor of any handoff. The shared tail is
// published only for observers (Len).

// CellRing is a single-producer, single-consumer ring of fixed-size cells,
// each carrying one small message inline. It suits latency-bound traffic
// between one pair of processes; larger messages use a RecordRing.
type CellRing struct {
	h *header
}

// CellRingSize returns the bytes a cell ring of cells cells of cellSize
// bytes occupies, header included.
func CellRingSize(cells, cellSize int) int {
	if cells <= 0 || cellSize <= 0 {
		return 0
	}
	return ringHeaderSize + cells*cellSize
}

// NewCellRing initializes a cell ring in mem, which must start on a cache
// line (AlignedBytes, or a Segment region) and hold CellRingSize bytes.
// cells and cellSize must be powers of two, cellSize at least 64; a cell
// carries up to cellSize-8 bytes.
func NewCellRing(mem []byte, cells, cellSize int) (*CellRing, error) {
	if cells <= 0 || cellSize <= 0 || cellSize > maxCellSize {
		return nil, ErrInvalid
	}
	h, err := initRing(mem, KindCellRing, uint64(cells), uint32(cellSize))
	if err != nil {
		return nil, err
	}
	return &CellRing{h: h}, nil
}

// AttachCellRing validates the cell ring another process (or goroutine)
// initialized in mem. A mismatched or corrupt header gives an error
// matching ErrBadSegment.
func AttachCellRing(mem []byte) (*CellRing, error) {
	h, err := attachRing(mem, KindCellRing)
	if err != nil {
		return nil, err
	}
	return &CellRing{h: h}, nil
}

// Cells returns the number of cells.
func (r *CellRing) Cells() int { return int(r.h.capacity) }

// MaxPayload returns the largest message a cell carries.
func (r *CellRing) MaxPayload() int { return int(r.h.maxPayload) }

// Len returns how many messages are published and not yet released, as
// seen at the moment of the call.
func (r *CellRing) Len() int {
	t := asm.LoadAcquire64(word64(r.h.base, offTail))
	h := asm.LoadAcquire64(word64(r.h.base, offHead))
	if t < h || t-h > r.h.capacity {
		return 0
	}
	return int(t - h)
}

// Producer attaches the calling process as the ring's only producer.
func (r *CellRing) Producer() (*CellProducer, error) {
	if err := r.h.attach(offProducerSlot, flagProducerClosed); err != nil {
		return nil, err
	}
	p := &CellProducer{r: r, size: r.h.capacity, mask: r.h.capacity - 1,
		payload: int(r.h.maxPayload), cells: r.h.data(),
		headp: word64(r.h.base, offHead), tailp: word64(r.h.base, offTail)}
	p.shift = log2(uint64(r.h.cellSize))
	p.tail = asm.LoadAcquire64(p.tailp)
	p.headCache = asm.LoadAcquire64(p.headp)
	p.lens = make([]uint32, min(r.h.capacity, maxBatch))
	p.ahead = min(uint64(prefetchCells.Get()), r.h.capacity/2)
	return p, nil
}

// Consumer attaches the calling process as the ring's only consumer.
func (r *CellRing) Consumer() (*CellConsumer, error) {
	if err := r.h.attach(offConsumerSlot, flagConsumerClosed); err != nil {
		return nil, err
	}
	c := &CellConsumer{r: r, mask: r.h.capacity - 1, payload: int(r.h.maxPayload),
		cells: r.h.data(), headp: word64(r.h.base, offHead)}
	c.shift = log2(uint64(r.h.cellSize))
	c.head = asm.LoadAcquire64(c.headp)
	c.wantp = r.h.roomWanted() // seen 0: requests made before the consumer came count
	return c, nil
}

// maxBatch bounds one Claim.
const maxBatch = 1024

func log2(n uint64) uint {
	s := uint(0)
	for n > 1 {
		n >>= 1
		s++
	}
	return s
}

// CellProducer is the sending side of a cell ring. Its methods are for one
// goroutine at a time.
type CellProducer struct {
	_         pad
	tail      uint64 // next position to fill
	headCache uint64 // consumer's head as last read
	size      uint64
	mask      uint64
	shift     uint
	payload   int
	cells     unsafe.Pointer
	headp     *uint64
	tailp     *uint64
	claimed   int
	ahead     uint64 // cells to prefetch ahead of the tail
	closed    bool
	dead      bool
	lens      []uint32
	r         *CellRing
	_         pad
}

func (p *CellProducer) cell(pos uint64) unsafe.Pointer {
	return unsafe.Add(p.cells, (pos&p.mask)<<p.shift)
}

// prefetch asks for write ownership of the first line of the n cells that
// follow, by the prefetch distance, the n cells at t, when the consumer is
// known to be done with them (the cached head says so): prefetching a cell
// it has yet to read would only steal the line from it.
func (p *CellProducer) prefetch(t uint64, n int) {
	if p.ahead == 0 {
		return
	}
	q, end := t+p.ahead, t+p.ahead+uint64(n)
	if end-p.headCache > p.size {
		// The cached head is too old to tell: refresh it (the load
		// that would otherwise wait until the ring looks full).
		p.headCache = asm.LoadAcquire64(p.headp)
	}
	for ; q < end && q-p.headCache < p.size; q++ {
		asm.PrefetchW(p.cell(q))
	}
}

// TrySend copies msg into the next cell and publishes it. It returns
// ErrFull if no cell is free, ErrTooLarge if msg exceeds MaxPayload, and
// ErrClosed after Close.
func (p *CellProducer) TrySend(msg []byte) error {
	if len(msg) > p.payload || p.claimed != 0 || p.closed {
		return p.sendErr(len(msg))
	}
	t := p.tail
	if t-p.headCache >= p.size {
		p.headCache = asm.LoadAcquire64(p.headp)
		if t-p.headCache >= p.size {
			return ErrFull
		}
	}
	p.prefetch(t, 1)
	c := p.cell(t)
	copy(unsafe.Slice((*byte)(unsafe.Add(c, cellHeader)), p.payload), msg)
	asm.StoreRelease64((*uint64)(c), uint64(uint32(t+1))<<32|uint64(len(msg)))
	p.tail = t + 1
	asm.StoreRelease64(p.tailp, t+1)
	return nil
}

func (p *CellProducer) sendErr(n int) error {
	switch {
	case p.closed:
		return ErrClosed
	case n > p.payload:
		return ErrTooLarge
	}
	return ErrInvalid // a claim is open: publish it first
}

// Send is TrySend that waits for a free cell. While it waits it checks,
// every rings_check_spins polls, that the consumer lives: it returns
// ErrPeerDead if the consumer's process died and ErrClosed if the consumer
// closed.
func (p *CellProducer) Send(msg []byte) error {
	s := newSpinner()
	for {
		err := p.TrySend(msg)
		if err != ErrFull {
			return err
		}
		if s.spin() {
			if err := p.Check(); err != nil {
				return err
			}
		}
	}
}

// Claim reserves up to n free cells for zero-copy filling and returns how
// many it reserved (0 if the ring is full). Fill each with Slot and
// Commit, then make them visible with Publish. At most 1024 cells, and
// never more than the ring holds, are reserved at once.
func (p *CellProducer) Claim(n int) int {
	if p.closed || n <= 0 {
		return 0
	}
	n = min(n, len(p.lens))
	t := p.tail
	free := p.size - (t - p.headCache)
	if free < uint64(n) {
		p.headCache = asm.LoadAcquire64(p.headp)
		free = p.size - (t - p.headCache)
	}
	n = int(min(uint64(n), free))
	p.prefetch(t, n)
	p.claimed = n
	clear(p.lens[:n])
	return n
}

// Slot returns the payload area, MaxPayload bytes, of the i-th claimed
// cell, or nil if i is out of the claim.
func (p *CellProducer) Slot(i int) []byte {
	if uint(i) >= uint(p.claimed) {
		return nil
	}
	c := p.cell(p.tail + uint64(i))
	return unsafe.Slice((*byte)(unsafe.Add(c, cellHeader)), p.payload)
}

// Commit sets the length of the message in the i-th claimed cell.
func (p *CellProducer) Commit(i, n int) error {
	if uint(i) >= uint(p.claimed) {
		return ErrInvalid
	}
	if uint(n) > uint(p.payload) {
		return ErrTooLarge
	}
	p.lens[i] = uint32(n)
	return nil
}

// Publish makes the first k claimed cells visible to the consumer, in
// order, and ends the claim; cells claimed beyond k are given back.
func (p *CellProducer) Publish(k int) {
	k = max(0, min(k, p.claimed))
	t := p.tail
	for i := range k {
		pos := t + uint64(i)
		asm.StoreRelease64((*uint64)(p.cell(pos)), uint64(uint32(pos+1))<<32|uint64(p.lens[i]))
	}
	p.claimed = 0
	if k > 0 {
		p.tail = t + uint64(k)
		asm.StoreRelease64(p.tailp, p.tail)
	}
}

// WantRoom tells the consumer that the producer found the ring full and
// is about to wait for room, asleep: RecordWriter.WantRoom, for cells.
func (p *CellProducer) WantRoom() { atomic.AddUint64(p.r.h.roomWanted(), 1) }

// Check reports the consumer's state: ErrClosed if it closed, ErrPeerDead
// if its process died, nil otherwise (also before it attaches).
func (p *CellProducer) Check() error {
	return p.r.h.checkPeer(offConsumerSlot, flagConsumerClosed, &p.dead)
}

// Close tells the consumer that no more messages will come; it may still
// receive those already published. The producer side cannot be attached
// again.
func (p *CellProducer) Close() error {
	if p.closed {
		return ErrClosed
	}
	p.closed, p.claimed = true, 0
	p.r.h.setFlag(flagProducerClosed)
	return nil
}

// CellConsumer is the receiving side of a cell ring. Its methods are for
// one goroutine at a time.
type CellConsumer struct {
	_       pad
	head    uint64 // next position to read
	mask    uint64
	shift   uint
	payload int
	cells   unsafe.Pointer
	headp   *uint64
	peeked  int
	closed  bool
	dead    bool
	wantp   *uint64 // the producer's requests for room (WantRoom) ...
	seen    uint64  // ... and their count as RoomWanted last saw it
	r       *CellRing
	_       pad
}

func (c *CellConsumer) cell(pos uint64) unsafe.Pointer {
	return unsafe.Add(c.cells, (pos&c.mask)<<c.shift)
}

// ready returns the header word of the cell at pos if it is published.
func (c *CellConsumer) ready(pos uint64) (uint64, bool) {
	w := asm.LoadAcquire64((*uint64)(c.cell(pos)))
	return w, uint32(w>>32) == uint32(pos+1)
}

// TryRecv copies the next message into buf and returns its length. It
// returns ErrEmpty if none is ready, ErrClosed if the producer closed and
// everything it sent was received, ErrShortBuffer (with the message's
// length, the message staying in the ring) if buf is too small, and
// ErrCorrupt if the cell's length is malformed (the cell is dropped).
func (c *CellConsumer) TryRecv(buf []byte) (int, error) {
	h := c.head
	w, ok := c.ready(h)
	if !ok || c.peeked != 0 || c.closed {
		return 0, c.recvErr()
	}
	n := int(uint32(w))
	if n > c.payload {
		c.drop()
		return 0, ErrCorrupt
	}
	if n > len(buf) {
		return n, ErrShortBuffer
	}
	copy(buf, unsafe.Slice((*byte)(unsafe.Add(c.cell(h), cellHeader)), n))
	c.head = h + 1
	asm.StoreRelease64(c.headp, h+1)
	return n, nil
}

func (c *CellConsumer) recvErr() error {
	switch {
	case c.closed:
		return ErrClosed
	case c.peeked != 0:
		return ErrInvalid // a peek is open: release it first
	case c.r.h.flags()&flagProducerClosed != 0:
		// The flag is set after the last publish: if the cell is still
		// not ready now, nothing more will come.
		if _, ok := c.ready(c.head); !ok {
			return ErrClosed
		}
	}
	return ErrEmpty
}

// drop skips the cell at the head, counting it as malformed.
func (c *CellConsumer) drop() {
	pvMalformed.Add(1)
	c.head++
	asm.StoreRelease64(c.headp, c.head)
}

// Recv is TryRecv that waits for a message. While it waits it checks,
// every rings_check_spins polls, that the producer lives: once everything
// published has been received it returns ErrPeerDead if the producer's
// process died, and ErrClosed if the producer closed.
func (c *CellConsumer) Recv(buf []byte) (int, error) {
	s := newSpinner()
	for {
		n, err := c.TryRecv(buf)
		if err != ErrEmpty {
			return n, err
		}
		if s.spin() {
			if err := c.Check(); err != nil {
				if n, err2 := c.TryRecv(buf); err2 != ErrEmpty {
					return n, err2
				}
				return 0, err
			}
		}
	}
}

// Peek returns how many messages, up to max, are ready for zero-copy
// reading with Message; Release frees them. A malformed cell at the head
// is dropped and reported with ErrCorrupt; one further on ends the batch
// and is reported by the next Peek.
func (c *CellConsumer) Peek(max int) (int, error) {
	if c.closed {
		return 0, ErrClosed
	}
	k := 0
	for k < max && k < maxBatch {
		w, ok := c.ready(c.head + uint64(k))
		if !ok {
			break
		}
		if int(uint32(w)) > c.payload {
			if k == 0 {
				c.drop()
				c.peeked = 0
				return 0, ErrCorrupt
			}
			break
		}
		k++
	}
	c.peeked = k
	return k, nil
}

// Message returns the payload of the i-th peeked message, valid until
// Release; nil if i is out of the peek.
func (c *CellConsumer) Message(i int) []byte {
	if uint(i) >= uint(c.peeked) {
		return nil
	}
	p := c.cell(c.head + uint64(i))
	n := min(int(uint32(*(*uint64)(p))), c.payload)
	return unsafe.Slice((*byte)(unsafe.Add(p, cellHeader)), n)
}

// Release frees the first k peeked messages' cells for the producer and
// ends the peek.
func (c *CellConsumer) Release(k int) {
	k = max(0, min(k, c.peeked))
	c.peeked = 0
	if k > 0 {
		c.head += uint64(k)
		asm.StoreRelease64(c.headp, c.head)
	}
}

// RoomWanted reports whether the producer asked for room (WantRoom) since
// the last call: RecordReader.RoomWanted, for cells.
func (c *CellConsumer) RoomWanted() bool {
	if n := asm.LoadAcquire64(c.wantp); n != c.seen {
		c.seen = n
		return true
	}
	return false
}

// Check reports the producer's state: ErrClosed if it closed, ErrPeerDead
// if its process died, nil otherwise (also before it attaches). Messages
// it published before closing or dying can still be received.
func (c *CellConsumer) Check() error {
	return c.r.h.checkPeer(offProducerSlot, flagProducerClosed, &c.dead)
}

// Close tells the producer that nothing more will be received: its
// blocking Send returns ErrClosed.
func (c *CellConsumer) Close() error {
	if c.closed {
		return ErrClosed
	}
	c.closed, c.peeked = true, 0
	c.r.h.setFlag(flagConsumerClosed)
	return nil
}

// Used returns the bytes of the cells published and not yet released by
// the consumer (whole cells), as seen at the moment of the call: the
// ring's occupancy. It loads only the ring's shared indexes, so any
// goroutine may call it while the producer writes, as long as the ring
// stays mapped.
func (p *CellProducer) Used() int {
	t := asm.LoadAcquire64(p.tailp)
	h := asm.LoadAcquire64(p.headp)
	if t < h || t-h > p.size {
		return 0
	}
	return int(t-h) << p.shift
}
