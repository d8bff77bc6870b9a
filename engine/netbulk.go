package engine

import (
	"errors"
	"io"
	"net/netip"

	"github.com/tachyon-hpc/tachyon/cvar"
	"github.com/tachyon-hpc/tachyon/nic"
	"github.com/tachyon-hpc/tachyon/pvar"
)

// The bulk lane carries the data of large rendezvous messages between
// ranks on different hosts over a kernel TCP connection (nic.Stream), one
// per pair of ranks and direction, instead of frames: the kernel moves a
// 64 KiB segment for the cost of one of Tachyon's frames, and copies the
// bytes straight from the sender's buffer and into the receiver's. The
// frames still carry everything else, the rendezvous handshake included,
// so the lane adds no latency to small messages and no ordering rule:
//
//  1. The receiver matches an rts of engine_net_bulk_min bytes or more
//     from a peer that published a bulk port, and asks for the data with
//     a cts flagged flagBulk.
//  2. The sender dials the receiver's listener the first time it needs
//     to, writes a hello (the job's cookie, both ranks and incarnations),
//     then for each flagged cts, in order, a header (the receiver's
//     request, the length) and the data, gathered from the queued
//     transfers into writes of engine_net_bulk_write_bytes; a send
//     completes when the kernel has taken its last byte, as a streamed
//     one does when its last frame is out. If the stream cannot be made,
//     the sender streams as frames instead, which the receiver takes all
//     the same.
//  3. The receiver accepts the stream, checks its hello, and reads each
//     header and then the data into the request it names; a header that
//     names no transfer it asked for, or a stream that breaks while it
//     waits, makes the peer dead, so no request waits for ever.
//
// The lane is polled while a transfer is under way in either direction;
// otherwise a poll pays one comparison for it. It is off under
// engine_net_auth: its bytes carry no tags, so authenticated jobs send
// everything as frames.

// Control variables of the bulk lane, read when a rank opens its network
// link (engine_net_bulk) and when it joins (engine_net_bulk_min).
var (
	netBulk = cvar.NewBool("engine_net_bulk", true,
		"Whether the data of rendezvous messages of engine_net_bulk_min bytes or more between ranks on different hosts crosses a kernel TCP connection (the bulk lane, one per pair of ranks and direction) rather than Tachyon's frames. Off, or with engine_net_auth, every byte goes as frames. A rank without it makes its peers send it frames.",
		cvar.WithCategory("engine"))
	netBulkLowat = cvar.NewInt("engine_net_bulk_lowat", 0,
		"SO_RCVLOWAT of a bulk lane's receiving socket (0: the kernel's own): the kernel acknowledges at once while less than this waits unread, and sizes the receive buffer to hold it. Reads never block: they take whatever has come (docs/network.md has the measurements).",
		cvar.WithCategory("engine"), cvar.WithRange(0, 1<<30), cvar.WithUnit("bytes"))
	netBulkWrite = cvar.NewInt("engine_net_bulk_write_bytes", 96<<10,
		"Most bytes a bulk lane's sender hands the kernel in one write: the queued messages' headers and data are gathered up to this (and nic.StreamBuffers buffers), and larger messages go in pieces of it. Larger writes mean fewer system calls but a longer wait for the receiver's first byte (docs/network.md has the measurements).",
		cvar.WithCategory("engine"), cvar.WithRange(4<<10, 1<<30), cvar.WithUnit("bytes"))
	netBulkMin = cvar.NewInt("engine_net_bulk_min", 8<<10,
		"Smallest rendezvous message whose data crosses the bulk lane (engine_net_bulk); smaller ones stream as frames. At engine_net_eager_limit or below, every rendezvous message's data crosses the lane.",
		cvar.WithCategory("engine"), cvar.WithRange(1, 1<<50), cvar.WithUnit("bytes"))
)

// Performance variables of the bulk lane.
var (
	pvNetBulkMsgs      = pvar.NewCounter("engine_net_bulk_messages", "Rendezvous messages received through the bulk lane.", pvar.WithUnit("messages"), pvar.WithBind(pvar.BindComm))
	pvNetBulkBytes     = pvar.NewCounter("engine_net_bulk_bytes", "Bytes received through the bulk lane.", pvar.WithUnit("bytes"), pvar.WithBind(pvar.BindComm))
	pvNetBulkRefused   = pvar.NewCounter("engine_net_bulk_refused", "Streams accepted and closed at once: a wrong or incomplete hello (another job's cookie, an unknown rank, a stale incarnation), a second stream from one peer, or too many waiting.", pvar.WithUnit("streams"), pvar.WithBind(pvar.BindComm))
	pvNetBulkFallbacks = pvar.NewCounter("engine_net_bulk_fallbacks", "Rendezvous messages sent as frames although their receiver asked for the bulk lane, because it could not be reached.", pvar.WithUnit("messages"), pvar.WithBind(pvar.BindComm))
)

const (
	bulkMagic = 0x4b4c5542_59484354 // "TCHYBULK", little-endian: the first eight bytes of a hello

	// A hello's fields: magic, cookie u64; from, from epoch, to, to epoch u32.
	helloMagic     = 0
	helloCookie    = 8
	helloFrom      = 16
	helloFromEpoch = 20
	helloTo        = 24
	helloToEpoch   = 28
	bulkHelloLen   = helloToEpoch + 4

	// A transfer's header's fields: receiver request u64, length u64.
	bulkRreq      = 0
	bulkLen       = 8
	bulkHeaderLen = bulkLen + 8
)

// bulkDev is a device's side of the bulk lane: its listener and the
// streams accepted whose hello has not all come.
type bulkDev struct {
	ln      *nic.StreamListener
	min     int
	lowat   int // engine_net_bulk_lowat
	write   int // engine_net_bulk_write_bytes
	active  int // transfers under way, both directions: the lane is polled while not 0
	hellos  []*bulkHello
	broken  error  // the listener's end (an Accept error not of resources): no transfer asks for the lane since
	scratch []byte // where bytes past a truncated receive's buffer go

	msgs, bytes, refused, fallbacks *pvar.CounterShard
}

// bulkHello is an accepted stream and the bytes of its hello so far.
type bulkHello struct {
	s *nic.Stream
	b [bulkHelloLen]byte
	n int
}

// bulkOut is a connection's sending side of the lane.
type bulkOut struct {
	to    netip.AddrPort // the peer's listener (port 0: it has none)
	s     *nic.Stream
	lost  bool // the stream could not be made: frames carry everything
	hello [bulkHelloLen]byte
	sent  int // bytes of hello written
	q     reqQueue
	hdrN  int // bytes of the head's header written
	// The next write's headers (the head's first) and buffers: the
	// queued transfers it gathers, in order.
	hdrs [nic.StreamBuffers / 2][bulkHeaderLen]byte
	vec  [][]byte
}

// bulkIn is a connection's receiving side of the lane.
type bulkIn struct {
	s     *nic.Stream
	want  int // transfers asked for (flagBulk) and not finished
	hdr   [bulkHeaderLen]byte
	hdrN  int
	r     *Request // the transfer being read, nil between transfers
	total int      // its length
	got   int      // bytes of it read
}

// newBulkDev gives d the lane's listener ln.
func newBulkDev(ln *nic.StreamListener) *bulkDev {
	return &bulkDev{
		ln: ln, min: int(netBulkMin.Get()), lowat: int(netBulkLowat.Get()), write: int(netBulkWrite.Get()), scratch: make([]byte, 64<<10),
		msgs: pvNetBulkMsgs.Shard(), bytes: pvNetBulkBytes.Shard(),
		refused: pvNetBulkRefused.Shard(), fallbacks: pvNetBulkFallbacks.Shard(),
	}
}

// bulkRecv reports whether the rendezvous receive r of length bytes from
// rank src should ask for its data over the lane, and if so counts it as
// wanted.
func (d *netDev) bulkRecv(src int, r *Request, length int) bool {
	b, c := d.bulk, d.conns[src]
	if b == nil || c == nil || c.dead != nil || c.out.to.Port() == 0 || length < b.min || b.broken != nil {
		return false
	}
	r.bulk = true
	c.in.want++
	b.active++
	d.markLane(c)
	return true
}

// bulkSend queues the data of the rendezvous send s, whose receiver asked
// for it over the lane, and reports false if the lane cannot take it: the
// endpoint streams it as frames then.
func (d *netDev) bulkSend(dest int, s *Request) bool {
	b, c := d.bulk, d.conns[dest]
	if b == nil || c == nil || c.out.lost || c.out.to.Port() == 0 {
		if b != nil {
			b.fallbacks.Inc()
		}
		return false
	}
	o := &c.out
	if o.s == nil {
		st, err := nic.DialStream(o.to)
		if err != nil {
			o.lost = true
			b.fallbacks.Inc()
			return false
		}
		o.s = st
		o.vec = make([][]byte, 0, nic.StreamBuffers)
		put64(o.hello[:], helloMagic, bulkMagic)
		put64(o.hello[:], helloCookie, d.cookie)
		put32(o.hello[:], helloFrom, d.self)
		put32(o.hello[:], helloFromEpoch, d.epoch)
		put32(o.hello[:], helloTo, c.rank)
		put32(o.hello[:], helloToEpoch, c.epoch)
	}
	if o.q.head == nil {
		o.hdrN = 0
	}
	o.q.push(s)
	b.active++
	d.markLane(c)
	return true
}

// putHeader writes the header of transfer s into h: the receiver's
// request, the length.
func putHeader(h *[bulkHeaderLen]byte, s *Request) {
	put64(h[:], bulkRreq, s.rreq)
	put64(h[:], bulkLen, uint64(len(s.buf)))
}

// pollBulk moves what it can on the lanes with transfers due (the
// device's lanes list, network.go) and returns how many system calls
// moved bytes. A lane with none due leaves the list.
func (ep *Endpoint) pollBulk() int {
	d := ep.net
	n := 0
	accept := false
	for j := 0; j < len(d.lanes); {
		c := d.lanes[j]
		if c.dead == nil {
			if c.out.q.head != nil {
				n += ep.writeBulk(c)
			}
			if c.in.want > 0 {
				if c.in.s == nil {
					accept = true
				} else {
					n += ep.readBulk(c)
				}
			}
		}
		if c.dead != nil || c.out.q.head == nil && c.in.want == 0 {
			c.inLanes = false
			last := len(d.lanes) - 1
			d.lanes[j] = d.lanes[last]
			d.lanes[last] = nil
			d.lanes = d.lanes[:last]
			continue
		}
		j++
	}
	if accept || len(d.bulk.hellos) > 0 {
		d.acceptBulk()
	}
	return n
}

// writeBulk writes the hello, then the queued transfers' headers and
// data, until the kernel takes no more, and returns how many writes
// moved bytes (work, for the progress engine's idea of idle).
func (ep *Endpoint) writeBulk(c *netConn) int {
	o, b := &c.out, c.dev.bulk
	n := 0
	for o.sent < bulkHelloLen {
		k, err := o.s.Write(o.hello[o.sent:], nil)
		if err != nil {
			ep.bulkWriteFailed(c, err)
			return n
		}
		if k == 0 {
			return n
		}
		o.sent += k
	}
	for o.q.head != nil {
		k, err := o.s.Write(o.gather(b.write)...)
		if err != nil {
			ep.bulkWriteFailed(c, err)
			return n
		}
		if k == 0 {
			return n
		}
		n++
		c.moved()
		for k > 0 {
			var s *Request
			if k, s = o.advance(k); s == nil {
				break
			}
			b.active--
			ep.complete(s, nil)
		}
	}
	return n
}

// gather returns the buffers of the next write: what is left of the
// head's header and data, then the headers and data of the transfers
// queued behind it, up to limit bytes.
func (o *bulkOut) gather(limit int) [][]byte {
	o.vec = o.vec[:0]
	room := limit
	i := 0
	for s := o.q.head; s != nil && room > bulkHeaderLen && i < len(o.hdrs); s, i = s.snext, i+1 {
		putHeader(&o.hdrs[i], s)
		h := o.hdrs[i][:]
		if i == 0 {
			h = h[o.hdrN:]
		}
		d := s.buf[s.sent:]
		d = d[:min(len(d), room-len(h))]
		o.vec = append(o.vec, h, d)
		room -= len(h) + len(d)
	}
	return o.vec
}

// advance accounts k bytes the kernel took from the gathered buffers, up
// to the end of the head transfer if that is where they reach: it then
// pops it and returns it as done, with the bytes left over for the
// transfers behind it.
func (o *bulkOut) advance(k int) (rest int, done *Request) {
	s := o.q.head
	hk := min(k, bulkHeaderLen-o.hdrN)
	o.hdrN += hk
	dk := min(k-hk, len(s.buf)-s.sent)
	s.sent += dk
	if rest = k - hk - dk; s.sent < len(s.buf) || o.hdrN < bulkHeaderLen {
		return rest, nil
	}
	o.q.pop()
	o.hdrN = 0
	return rest, s
}

// bulkWriteFailed handles a stream the kernel would not write to. One
// never made (refused, unreachable) leaves the transfers to the frames,
// which the receiver takes as well; one that broke after it carried data
// makes the peer dead, since what it took may not have arrived.
func (ep *Endpoint) bulkWriteFailed(c *netConn, err error) {
	o, b := &c.out, c.dev.bulk
	o.s.Close()
	o.s = nil
	o.lost = true
	if o.sent > 0 {
		c.fail(c.dev.clock(), "bulk lane: %v", err)
		return
	}
	p := &ep.peers[c.rank]
	for s := o.q.pop(); s != nil; s = o.q.pop() {
		b.active--
		b.fallbacks.Inc()
		s.sent = 0
		p.dataq.push(s)
	}
	ep.markQueued(p)
}

// readBulk reads the headers and data that have come on c's stream into
// the requests they name, and returns how many reads moved data.
func (ep *Endpoint) readBulk(c *netConn) int {
	in, d := &c.in, c.dev
	b := d.bulk
	n := 0
	for in.want > 0 {
		if in.r == nil {
			k, err := in.s.Read(in.hdr[in.hdrN:])
			if err != nil {
				ep.bulkReadFailed(c, err)
				return n
			}
			if k == 0 {
				return n
			}
			if in.hdrN += k; in.hdrN < bulkHeaderLen {
				continue
			}
			in.hdrN = 0
			r := ep.reqs.lookup(u64(in.hdr[:], bulkRreq))
			length := u64(in.hdr[:], bulkLen)
			if r == nil || r.kind != kindRecv || r.state != stReceiving || r.status.Source != int(c.rank) ||
				!r.bulk || r.got != 0 || uint64(r.total) != length {
				ep.malformed.Inc()
				ep.bulkReadFailed(c, errors.New("a header that names no transfer this rank asked for"))
				return n
			}
			in.r, in.total, in.got = r, r.total, 0
		}
		r := in.r
		dst := b.scratch[:min(len(b.scratch), in.total-in.got)]
		if in.got < len(r.buf) {
			dst = r.buf[in.got:min(len(r.buf), in.total)]
		}
		k, err := in.s.Read(dst)
		if err != nil {
			ep.bulkReadFailed(c, err)
			return n
		}
		if k == 0 {
			return n
		}
		n++
		in.got += k
		c.heard = d.now
		c.moved()
		b.bytes.Add(uint64(k))
		if in.got < in.total {
			continue
		}
		in.r = nil
		in.want--
		b.active--
		b.msgs.Inc()
		r.bulk = false
		r.got = in.total
		r.sent = min(in.total, len(r.buf))
		ep.finishRecv(r, in.total)
		if in.want == 0 && c.bye {
			c.fail(d.now, "closed its endpoint") // its last transfer is in
		}
	}
	return n
}

// bulkReadFailed makes c's peer dead: its stream broke, or closed, or
// carried garbage, while this rank waited for data on it.
func (ep *Endpoint) bulkReadFailed(c *netConn, err error) {
	if errors.Is(err, io.EOF) {
		err = errors.New("the peer closed it with transfers due")
	}
	c.in.s.Close()
	c.in.s = nil
	c.fail(c.dev.clock(), "bulk lane: %v", err)
}

// bulkDone notes that the lane transfer r asked for came as frames
// instead (the sender could not reach the lane).
func (d *netDev) bulkDone(src int, r *Request) {
	r.bulk = false
	if c := d.conns[src]; c != nil && c.in.want > 0 {
		c.in.want--
		d.bulk.active--
		if c.in.want == 0 && c.bye {
			c.fail(d.now, "closed its endpoint")
		}
	}
}

// acceptBulk takes the streams peers dialed and reads their hellos; a
// stream whose hello is whole and right becomes its peer's lane. Where
// descriptors or memory run out, the streams wait in the listener's queue
// for the next poll; where the listener itself fails, acceptBroken turns
// the lane to frames.
func (d *netDev) acceptBulk() {
	b := d.bulk
	for b.broken == nil {
		s, err := b.ln.Accept()
		if err != nil && !errors.Is(err, nic.ErrStreamBusy) {
			d.acceptBroken(err)
		}
		if s == nil || err != nil {
			break
		}
		if len(b.hellos) >= len(d.list)+8 {
			// More silent streams than peers: someone else's. The
			// oldest goes, so that they cannot keep a peer's out (a
			// peer's hello follows its connection at once).
			b.hellos[0].s.Close()
			b.refused.Inc()
			b.hellos = append(b.hellos[:0], b.hellos[1:]...)
		}
		b.hellos = append(b.hellos, &bulkHello{s: s})
	}
	for i := 0; i < len(b.hellos); {
		h := b.hellos[i]
		k, err := h.s.Read(h.b[h.n:])
		h.n += k
		if err == nil && h.n < bulkHelloLen {
			i++
			continue
		}
		b.hellos[i] = b.hellos[len(b.hellos)-1]
		b.hellos[len(b.hellos)-1] = nil
		b.hellos = b.hellos[:len(b.hellos)-1]
		if err != nil || !d.helloed(h) {
			h.s.Close()
			b.refused.Inc()
		}
	}
}

// acceptBroken records the listener's end, err, and closes it: the kernel
// refuses the streams peers dial from then on, and they send what they
// would have sent over the lane as frames (bulkWriteFailed); this side asks
// for no more transfers over the lane and polls the listener no more.
func (d *netDev) acceptBroken(err error) {
	d.bulk.broken = err
	d.bulk.ln.Close()
}

// helloed makes h's stream its sender's lane if its hello is this job's,
// from a network peer's current incarnation, to this one.
func (d *netDev) helloed(h *bulkHello) bool {
	from, to := u32(h.b[:], helloFrom), u32(h.b[:], helloTo)
	if u64(h.b[:], helloMagic) != bulkMagic || u64(h.b[:], helloCookie) != d.cookie ||
		to != d.self || u32(h.b[:], helloToEpoch) != d.epoch || int(from) >= len(d.conns) {
		return false
	}
	c := d.conns[from]
	if c == nil || c.dead != nil || c.epoch != u32(h.b[:], helloFromEpoch) || c.in.s != nil {
		return false
	}
	if d.bulk.lowat > 0 {
		h.s.SetReadLowWater(d.bulk.lowat) // a tuning: the lane works without it
	}
	c.in.s = h.s
	return true
}

// bulkGone drops the lane to rank i, whose operations have failed.
func (d *netDev) bulkGone(i int) {
	b, c := d.bulk, d.conns[i]
	if b == nil || c == nil {
		return
	}
	for s := c.out.q.pop(); s != nil; s = c.out.q.pop() {
		b.active--
	}
	b.active -= c.in.want
	c.in.want, c.in.r = 0, nil
	c.closeBulk()
}

// closeBulk closes c's streams.
func (c *netConn) closeBulk() {
	if c.out.s != nil {
		c.out.s.Close()
		c.out.s = nil
	}
	if c.in.s != nil {
		c.in.s.Close()
		c.in.s = nil
	}
}

// closeBulk closes the listener and the streams not yet taken.
func (b *bulkDev) close() {
	b.ln.Close()
	for _, h := range b.hellos {
		h.s.Close()
	}
	b.hellos = nil
}
