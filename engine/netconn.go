package engine

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math/bits"

	"github.com/tachyon-hpc/tachyon/nic"
)

// The network transport carries packets to a peer that shares no memory
// with this rank, over a nic.Link, reliably, in order and once each, as a
// reliable-connected queue pair would. A data frame carries one packet or
// several, each led by its length (u16, little-endian): the engine splits
// messages into packets no larger than MaxPacket (the link's MTU less the
// frame header and one length), and small packets sent while earlier
// frames are still in flight share frames, since a frame costs the kernel
// far more than the bytes in it.
//
// Sending (Reserve, Commit):
//  1. Reserve returns room in the frame being filled, or takes a new frame
//     from the link if the congestion window (at most engine_net_window
//     frames not yet acknowledged) and the peer's credit allow (netcc.go),
//     numbering it (seq).
//  2. Commit adds the packet to the frame. If nothing is in flight to the
//     peer (a ping-pong, the first message of a burst), the frame goes at
//     once; otherwise it stays open for the packets behind it, and goes
//     when it is full or at the endpoint's next poll (the keeper's, for a
//     rank that stops polling: engine_net_coalesce_max). Sending stamps
//     what this side has received from the peer (ack, sack, credit: every
//     frame carries them, so that a ping-pong's answer is its
//     acknowledgement) and keeps the frame (nic.TxDesc.Keep) until the
//     peer acknowledges it.
//  3. The acknowledgement frees it. A frame not acknowledged goes again:
//     when an acknowledgement shows a later frame arrived and it did not
//     (fast retransmit, once a round trip), or when the retransmission
//     timeout passes (smoothed round-trip time and variance, between
//     engine_net_rto_min and engine_net_rto_max, doubling at each timeout
//     in a row). No progress for engine_net_peer_timeout makes the peer
//     dead.
//
// Receiving (the device's pump, Peek, Packet, Release):
//  1. The device reads the link and hands each frame to the connection of
//     its sender (header src), if its epoch is the one the sender
//     published; a frame of another incarnation, or for another
//     endpoint, is dropped and counted.
//  2. Its ack, sack and credit go to the sending side (above).
//  3. A data frame goes into the reorder window at its seq; one already
//     received or beyond the window is dropped (and acknowledged again: the
//     sender missed an acknowledgement). The packets of the frames from the
//     next expected seq on that have all arrived are the Inbox's, in order;
//     a frame whose lengths do not add up is counted malformed and
//     delivers nothing.
//  4. Released packets give their frames back and open the window (the
//     peer's credit: this side's share of what its link can take in,
//     netcc.go); an acknowledgement goes back with the next frame to the peer, or on its
//     own after engine_net_ack_every frames, at once on a gap, a duplicate
//     or a probe, or after engine_net_ack_delay.

// netConn is the connection to one peer: the Link this rank sends on and
// the Inbox it receives from. The endpoint's lock guards it.
type netConn struct {
	dev    *netDev
	peer   nic.Peer // the peer, in dev.link
	rank   uint32   // the peer's endpoint
	epoch  uint32   // the peer's incarnation, from its card
	max    int      // MaxPacket
	mask   uint32   // window - 1
	window uint32

	// Sending. Every seq in [sndUna, sndNxt) is a frame kept in tx until
	// acknowledged; those in [sndUna, sndSent) went out at least once.
	sndNxt, sndUna, sndSent uint32
	sndLimit                uint32 // the peer takes seq below this (ack + credit)
	tx                      []txSlot
	open                    bool // frame sndNxt-1 is being filled: fill bytes of pkts packets so far
	fill, pkts              int
	wakePolls               uint64 // the endpoint's polls at the last Wake
	txd                     [1]nic.TxDesc

	// The retransmission timer: srtt and rttvar in clock counts (0: no
	// sample yet), rto the current timeout, rtoAt when sndUna is due
	// (0: nothing outstanding), progressAt the last time the peer
	// acknowledged something new or was first waited on.
	srtt, rttvar, rto uint64
	rtoAt, progressAt uint64
	backoff           uint
	heard             uint64 // when a frame of the peer's last came
	// askedFrom is when this rank began to wait on the peer after a
	// pause (Check not called for netDev.pause, or credit waited for
	// from idle), checked when Check last ran: silence counts from
	// the later of askedFrom and heard, since an idle pair sends nothing
	// and a frame heard before the pause says nothing of the peer now.
	askedFrom, checked uint64
	// Stall detection (Check): movedAt is when a transfer with the peer
	// last moved (an acknowledgement of new frames, more credit, a frame
	// received in order, bulk lane bytes), waitFrom when Check first saw
	// one under way since the connection was last idle (0: idle), starved
	// whether Reserve last found no room.
	movedAt, waitFrom uint64
	starved           bool
	stall             uint8  // what Reserve last waited for (stallCwnd, stallCredit; netcc.go)
	sendErr           bool   // a link.Send error was logged for this peer
	bye               bool   // the peer said bye while lane transfers were due from it (closed)
	probed            uint64 // when a probe last went out
	dead              error
	// Where the connection is in the device's lists of work (network.go).
	inWork, inReady, inLanes bool
	hidx                     int32        // in dev.timers: index+1 (0: not there)
	timerAt                  uint64       // its key there
	opener                   *frameOpener // checks the peer's frames (engine_net_auth; nil: off)

	// Congestion control (netcc.go): the frames that may be in flight
	// (cwnd, at most window), the slow-start threshold, the frames
	// acknowledged toward the next increase above it, and while a
	// recovery from a loss lasts (recovering), the seq that ends it.
	cwnd, ssthresh, cwndAcc uint32
	recover                 uint32
	recovering              bool
	// Pacing (netcc.go): the theoretical time of the next frame's slot,
	// when the frame held back may go, and whether pacing holds frames
	// back (paceHeld, until every frame sealed has gone).
	paceTAT, paceAt uint64
	paceHeld        bool

	// The bulk lane (netbulk.go), each way.
	out bulkOut
	in  bulkIn

	// The peer's clock error, as its last clock probe told it, and when
	// (netclock.go; 0: never).
	clockErr float64
	clockAt  uint64

	// Receiving. Every seq in [dlvNxt, rcvNxt) has arrived and its packets
	// are the Inbox's, from offset dlvOff of frame dlvNxt on; seqs in
	// [rcvNxt, dlvNxt+window) may have arrived (out of order). Packet's
	// cursor (curI, curSeq, curOff) walks the packets Peek counted.
	rcvNxt, dlvNxt uint32
	dlvOff         int
	curI           int
	curSeq         uint32
	curOff         int
	rx             []rxSlot
	ooo            int    // frames held beyond rcvNxt
	ackOwed        int    // frames received since this side last acknowledged
	ackNow         bool   // acknowledge at the end of this pump
	ackAt          uint64 // when a delayed acknowledgement is due (0: none)
	advLimit       uint32 // the limit (dlvNxt + credit) last advertised
	credit         uint32 // frames the peer may send beyond dlvNxt: this side's share of its link (netcc.go)
	dataAt         uint64 // when the peer's last data frame came (0: never), for the share (netcc.go)
}

// txSlot is a frame sent and not yet acknowledged.
type txSlot struct {
	frame  nic.Frame
	n      uint16 // bytes of the frame: header and packet
	sacked bool   // the peer has it (selective acknowledgement)
	retx   bool   // sent again: no round-trip sample from it (Karn)
	queued bool   // in the device's transmit batch (nettx.go)
	sentAt uint64 // when it last went out
}

// rxSlot is a frame received and not yet released.
type rxSlot struct {
	frame nic.Frame
	data  []byte // the packets, each led by its length
	left  int    // packets not yet released
	have  bool
}

// pktLen is the length that leads each packet in a data frame.
const pktLen = 2

// seqLT reports whether seq a comes before b, modulo 2^32.
func seqLT(a, b uint32) bool { return int32(a-b) < 0 }

// newNetConn makes a connection to the peer of rank and incarnation
// epoch, added to the link as peer, begun (its windows made).
func newNetConn(d *netDev, peer nic.Peer, rank, epoch uint32, now uint64) *netConn {
	c := newPeerConn(d, peer, rank, epoch, now)
	if !c.begin() {
		panic(c.dead) // only with a job key newNetDev refused
	}
	return c
}

// newPeerConn makes the connection to a peer as the bootstrap does for
// every network peer: what it needs to answer a probe or say bye, not
// yet begun. A rank of a large job talks to few of its peers: the
// windows (two arrays of engine_net_window slots), the frame key and the
// congestion window come with the first frame either way (begin).
func newPeerConn(d *netDev, peer nic.Peer, rank, epoch uint32, now uint64) *netConn {
	w := d.window
	return &netConn{
		dev: d, peer: peer, rank: rank, epoch: epoch,
		mask: w - 1, window: w,
		sndLimit: w, advLimit: w, credit: d.share,
		rto: d.rtoInit, heard: now, progressAt: now,
	}
}

// begin makes what the connection needs to carry data: its windows, its
// peer's frame key (engine_net_auth), its congestion window and its
// share of credit. It runs at the first frame to or from the peer; a key
// that cannot be made fails the peer, and begin reports false.
func (c *netConn) begin() bool {
	d := c.dev
	if d.job != nil {
		aead, err := frameAEAD(d.job, c.rank, c.epoch)
		if err != nil {
			c.fail(d.clock(), "its frame key: %v", err)
			return false
		}
		c.opener = &frameOpener{aead: aead}
	}
	c.tx, c.rx = make([]txSlot, c.window), make([]rxSlot, c.window)
	c.credit = d.share
	c.startCC()
	d.live = append(d.live, c)
	return true
}

// Reserve returns room for a packet of n bytes: in the frame being
// filled, or in a new one (the full one goes). It returns nil if the
// congestion window is full, the peer has given no credit, or the link no
// frame.
func (c *netConn) Reserve(n int) []byte {
	if n > c.max || c.dead != nil {
		return nil
	}
	if c.open && c.fill+pktLen+n > c.max {
		c.seal(true)
	}
	d := c.dev
	if !c.open {
		if c.tx == nil && !c.begin() {
			return nil
		}
		if c.sndNxt-c.sndUna >= c.cwnd {
			c.wait(stallCwnd)
			return nil
		}
		if !seqLT(c.sndNxt, c.sndLimit) {
			// No credit: if nothing is in flight to bring news of more,
			// the timer asks for it (timeout).
			c.wait(stallCredit)
			if c.rtoAt == 0 {
				now := d.clock()
				c.askedFrom = max(c.askedFrom, now)
				c.rtoAt = now + c.rto
				d.armed(c, c.rtoAt)
			}
			return nil
		}
		if d.link.Alloc(d.one[:]) == 0 {
			c.starved = true
			return nil
		}
		c.starved, c.stall = false, stallNone
		c.tx[c.sndNxt&c.mask] = txSlot{frame: d.one[0]}
		c.sndNxt++
		c.open, c.fill, c.pkts = true, 0, 0
	}
	at := nic.HeaderLen + c.fill + pktLen
	return d.link.Bytes(c.tx[(c.sndNxt-1)&c.mask].frame)[at : at+n]
}

// Commit adds the reserved packet's first n bytes to the frame, and sends
// the frame at once if nothing else is in flight to the peer; else it
// waits for more packets, or the next poll.
func (c *netConn) Commit(n int) {
	d := c.dev
	b := d.link.Bytes(c.tx[(c.sndNxt-1)&c.mask].frame)
	binary.LittleEndian.PutUint16(b[nic.HeaderLen+c.fill:], uint16(n))
	c.fill += pktLen + n
	c.pkts++
	if c.sndUna == c.sndSent && c.sndSent == c.sndNxt-1 {
		c.seal(false)
		return
	}
	if c.fill >= d.tx.burstBytes && d.tx.goesNow(c.pkts) && !d.tx.on {
		// A burst of small messages: this frame's send is paid for, and
		// the peer starts on them now.
		c.seal(true)
		return
	}
	d.coalesced(c)
}

// seal closes the frame being filled: its header written, it goes now if
// every frame before it has gone. A frame full (held) while earlier ones
// are in flight and no batch is open waits, sealed, for the frame left
// open behind it, and goes with it: up to engine_net_tx_batch of them
// go together (nettx.go); but one of engine_net_burst_packets small
// messages goes at once, with those held before it.
func (c *netConn) seal(held bool) {
	d := c.dev
	seq := c.sndNxt - 1
	t := &c.tx[seq&c.mask]
	h := nic.Header{Type: nic.TypeData, Length: uint16(c.fill + d.trailer), Cookie: d.cookie, Src: d.self, Dst: c.rank,
		Epoch: d.epoch, Seq: seq}
	h.Put(d.link.Bytes(t.frame))
	t.n = uint16(nic.HeaderLen + c.fill + d.trailer)
	c.open = false
	d.sentData.Inc()
	if held && !d.tx.on {
		if c.sndNxt-c.sndSent >= uint32(d.tx.max) || d.tx.goesNow(c.pkts) {
			c.sendSealed()
		}
		return
	}
	if c.sndSent == seq && c.pace() && c.transmit(seq, txData) {
		c.sndSent++
	}
}

func (c *netConn) Put(h0, h1 uint64, payload []byte) bool { return putWords(c, h0, h1, payload) }
func (c *netConn) MaxPacket() int                         { return c.max }

// Wake ends an operation that committed packets (the endpoint calls it
// once per such operation): a frame left open goes now, unless the
// operation followed another with no poll between, a burst of sends
// whose frames fill up and go at the next poll. A network peer polls its
// link: there is no doorbell to ring.
func (c *netConn) Wake() {
	polls := *c.dev.polls
	if (c.open || c.sndSent != c.sndNxt) && polls != c.wakePolls {
		c.flush()
	}
	c.wakePolls = polls
}

// WantRoom does nothing: room comes with an acknowledgement, which the
// device's pump reads; its deadline (NextDue) keeps a parked rank polling.
func (c *netConn) WantRoom() {}

// Check reports the peer dead once it has answered nothing for
// engine_net_peer_timeout; after engine_net_probe_interval of silence it
// asks for an answer. The endpoint calls it while it waits on operations.
func (c *netConn) Check() error {
	if c.dead != nil {
		return c.dead
	}
	d := c.dev
	if d.clock()-d.pumped >= d.ackDelay {
		// What has come counts before silence is judged: read unless a
		// pump just did (the poll that runs the checks, a Check of
		// another peer), so that checking every peer costs one read of
		// the link, not one a peer.
		d.pump()
		d.closeTx()
	}
	if c.dead != nil {
		return c.dead
	}
	now := d.clock()
	if now-c.checked >= d.pause() {
		c.askedFrom = now // a wait after a pause: the probe below asks
	}
	c.checked = now
	if now-max(c.heard, c.askedFrom) >= d.peerTimeout {
		c.fail(now, "no frame for %v", d.peerTimeoutD)
		return c.dead
	}
	if !c.underway() {
		c.waitFrom = 0
	} else if c.waitFrom == 0 {
		c.waitFrom = now
	} else if since := max(c.waitFrom, c.movedAt); now > since && now-since >= d.stallTimeout {
		c.stalled(now)
		return c.dead
	}
	if now-c.heard >= d.probeEvery && now-c.probed >= d.probeEvery {
		c.probed = now
		c.sendAck(nic.FlagAckNow)
	}
	return nil
}

// underway reports whether a transfer with the peer is under way: frames
// not acknowledged, packets waiting for room, a hole in what came, or
// bulk lane transfers due either way.
func (c *netConn) underway() bool {
	return c.sndUna != c.sndNxt || c.starved || c.ooo > 0 || c.in.want > 0 || c.out.q.head != nil
}

// moved notes that a transfer with the peer moved.
func (c *netConn) moved() { c.movedAt = c.dev.now }

// stalled fails the peer whose transfer has not moved for
// engine_net_stall_timeout though it answers: the error names the
// transfer, the stall is counted and logged, and every operation
// involving the peer fails rather than waiting for ever.
func (c *netConn) stalled(now uint64) {
	d := c.dev
	d.stalls.Inc()
	c.fail(now, "transfer stalled: nothing moved for %v while the peer answers (sending: seq %d acknowledged below, %d frames sent beyond, %d numbered, credit below seq %d, congestion window %d, waiting for room %v; receiving: in order below seq %d, %d frames beyond; bulk lane: %d transfers due in, %d of %d bytes of the current one read, sends queued %v)",
		d.stallTimeoutD, c.sndUna, c.sndSent-c.sndUna, c.sndNxt-c.sndUna, c.sndLimit, c.cwnd, c.starved,
		c.rcvNxt, c.ooo, c.in.want, c.in.got, c.in.total, c.out.q.head != nil)
	slog.Warn("tachyon: network transfer stalled", "rank", d.self, "peer", c.rank, "error", c.dead)
}

// closed takes the peer's bye. Everything it sent before came first on
// the frames, but its bulk lane may still hold data: a peer that waits
// for lane transfers stays alive until they are in (readBulk), or until
// the lane breaks or stays silent for engine_net_peer_timeout; otherwise
// it is dead at once.
func (c *netConn) closed(now uint64) {
	if c.in.want > 0 {
		c.bye = true
		return
	}
	c.fail(now, "closed its endpoint")
}

// fail makes the peer dead.
func (c *netConn) fail(now uint64, format string, args ...any) {
	if c.dead == nil {
		c.dead = fmt.Errorf("network peer %d: "+format, append([]any{c.rank}, args...)...)
		c.rtoAt, c.ackAt = 0, 0
		c.dev.deaths.Inc()
	}
}

// stamp writes what this side has received into frame header b: ack,
// sack and credit. Every frame to the peer carries them.
func (c *netConn) stamp(b []byte) {
	limit := c.dlvNxt + c.credit
	nic.PutAck(b, c.rcvNxt, c.sack(), uint16(limit-c.rcvNxt))
	c.advLimit = limit
	c.ackOwed, c.ackNow, c.ackAt = 0, false, 0
}

// sack returns the selective acknowledgement: bit i for seq rcvNxt+1+i
// received.
func (c *netConn) sack() uint32 {
	if c.ooo == 0 {
		return 0
	}
	var s uint32
	end := c.dlvNxt + c.window
	for i := uint32(0); i < 32; i++ {
		seq := c.rcvNxt + 1 + i
		if !seqLT(seq, end) {
			break
		}
		if c.rx[seq&c.mask].have {
			s |= 1 << i
		}
	}
	return s
}

// sackBody returns the selective acknowledgement of the whole receive
// window, for the body of an acknowledgement on its own: bit i (of byte
// i/8, bit i%8: the header's sack in its little-endian bytes, extended)
// for seq rcvNxt+1+i received. Nil when the header's 32 bits say it all,
// so that one loss does not leave the frames past them to the timer.
func (c *netConn) sackBody() []byte {
	if c.ooo == 0 {
		return nil
	}
	b := c.dev.sackBuf
	clear(b)
	end, n := c.dlvNxt+c.window, 0
	for i := uint32(0); i < uint32(8*len(b)); i++ {
		seq := c.rcvNxt + 1 + i
		if !seqLT(seq, end) {
			break
		}
		if c.rx[seq&c.mask].have {
			b[i/8] |= 1 << (i % 8)
			n = int(i/8) + 1
		}
	}
	if n <= 4 {
		return nil
	}
	return b[:n]
}

// flush sends the frame being filled and those the link did not take
// yet.
func (c *netConn) flush() {
	if c.open {
		c.seal(false)
	}
	c.sendSealed()
}

// sendSealed sends the frames sealed that the link has not taken yet, in
// one batch.
func (c *netConn) sendSealed() {
	d := c.dev
	batch := !d.tx.on && c.sndNxt-c.sndSent > 1
	if batch {
		d.openTx()
	}
	for c.sndSent != c.sndNxt && c.pace() && c.transmit(c.sndSent, txData) {
		c.sndSent++
	}
	if c.sndSent == c.sndNxt {
		c.paceHeld = false
	}
	if batch {
		d.closeTx()
	}
}

// sendAck sends an acknowledgement on its own, with flags (FlagAckNow:
// a probe, which the peer answers at once), and in its body the
// selective acknowledgement of the whole window when frames beyond the
// header's 32 bits came (sackBody).
func (c *netConn) sendAck(flags nic.Flags) {
	c.sendControl(nic.TypeAck, flags, c.sackBody()) // refused, it is owed again: the next service sends it
}

// sendBye tells the peer this endpoint is closing. Not kept: the closing
// endpoint sends engine_net_bye_copies of it, and a peer takes the second
// as it took the first.
func (c *netConn) sendBye() { c.sendControl(nic.TypeBye, 0, nil) }

// sendControl sends a frame of type typ with no packet, body after its
// header, or queues it in the open batch, and reports whether the link
// took it (or will be offered it). Not kept: an
// acknowledgement lost is made up for by the next, a bye by the peer's
// timeout, a clock probe by the next probe.
func (c *netConn) sendControl(typ nic.Type, flags nic.Flags, body []byte) bool {
	d := c.dev
	if d.link.Alloc(d.ackFrame[:]) == 0 {
		return false
	}
	b := d.link.Bytes(d.ackFrame[0])
	h := nic.Header{Type: typ, Flags: flags, Length: uint16(len(body) + d.trailer), Cookie: d.cookie, Src: d.self, Dst: c.rank,
		Epoch: d.epoch, Seq: c.sndNxt}
	h.Put(b)
	c.stamp(b)
	copy(b[nic.HeaderLen:], body)
	n := nic.HeaderLen + len(body) + d.trailer
	if d.sealer != nil {
		d.sealer.seal(b[:n])
	}
	t := nic.TxDesc{Frame: d.ackFrame[0], Len: uint16(n), Peer: c.peer}
	w := txWork{c: c, kind: txControl}
	if typ == nic.TypeAck {
		w.kind = txAck
	}
	if d.tx.on {
		d.queue(t, w)
		return true
	}
	d.ackTx[0] = t
	k, err := d.link.Send(d.ackTx[:])
	d.txSends.Inc()
	if k == 0 {
		c.refused(&w, t.Frame, err) // the stamp's acknowledgement did not go: the next service sends one
		return false
	}
	c.sent(&w, t.Frame, 0)
	return true
}

// sendFailed counts a link.Send that took nothing because of err, and
// logs the first error to the peer. A full transmit queue (nil) or a
// kept frame whose last send the kernel has not finished (an AF_XDP
// link's nic.ErrInFlight, a retransmission that came too soon) is no
// error. The frame is not lost: a kept one goes again from flush or the
// retransmission timer, an acknowledgement is owed again.
func (c *netConn) sendFailed(err error) {
	if err == nil || errors.Is(err, nic.ErrInFlight) {
		return
	}
	c.dev.sendErrs.Inc()
	if !c.sendErr {
		c.sendErr = true
		slog.Warn("tachyon: a frame to a network peer was not sent; it goes again", "rank", c.dev.self, "peer", c.rank, "error", err)
	}
}

// onAck takes what the peer says it has received: ack (every seq before
// it), sack (bit i: seq ack+1+i) and credit (it takes seq below
// ack+credit).
func (c *netConn) onAck(ack, sack uint32, credit uint16) {
	d := c.dev
	if seqLT(c.sndSent, ack) || uint32(credit) > c.window {
		// Acknowledges what never went (a frame reserved, or sealed and
		// not yet taken by the link, is no frame the peer can have), or
		// gives more than a window: not the peer's.
		return
	}
	// The peer takes seq below ack+credit (its released frames plus its
	// window): as that only grows, an older acknowledgement that comes
	// late changes nothing.
	if limit := ack + uint32(credit); seqLT(c.sndLimit, limit) {
		c.sndLimit = limit
		c.moved()
	}
	if seqLT(c.sndUna, ack) {
		// A round-trip sample comes only from an acknowledgement that no
		// loss held back: if any frame it covers went again, or had been
		// acknowledged selectively beyond a hole, the newest one waited
		// for the recovery, and its sample would stretch the timeout
		// that the next recovery waits for (Karn's rule, widened).
		last := &c.tx[(ack-1)&c.mask]
		clean := last.sentAt != 0
		for s := c.sndUna; s != ack; s++ {
			t := &c.tx[s&c.mask]
			if t.retx || t.sacked {
				clean = false
			}
			if t.queued {
				d.sendTx() // sent again earlier in this pump: it goes before its frame is given back
			}
			d.release(t.frame)
			if s != ack-1 {
				*t = txSlot{}
			}
		}
		if clean {
			c.sample(d.now - last.sentAt)
		}
		*last = txSlot{}
		if flight := c.sndNxt - c.sndUna; c.recovering || 2*flight >= c.cwnd {
			c.grow(ack, ack-c.sndUna, flight) // a ping-pong's acknowledgement skips it
		}
		c.sndUna = ack
		c.moved()
		if c.backoff > 0 {
			// Progress ends the back-off: the timeout is the estimate's
			// again, sample or not (the frames acknowledged may all have
			// gone twice).
			c.backoff = 0
			c.rto = c.estimate()
		}
		c.progressAt = d.now
		c.rtoAt = 0
		if c.sndUna != c.sndSent {
			c.rtoAt = d.now + c.rto
			if c.hidx == 0 || c.rtoAt < c.timerAt {
				d.timers.arm(c, c.rtoAt) // sooner than the key: a shorter timeout
			}
		}
	}
	if sack == 0 {
		return
	}
	// Frames the peer has beyond a hole: mark them, and send the holes
	// again.
	top := c.sndUna
	for i := uint32(0); i < 32; i++ {
		if sack&(1<<i) != 0 {
			top = c.sacked(ack+1+i, top)
		}
	}
	c.resendHoles(top)
}

// onSack takes the selective acknowledgement of the whole window that
// an acknowledgement on its own may carry in its body (sackBody: bit i
// for seq ack+1+i), as onAck takes the header's 32 bits: it marks the
// frames the peer has and sends the holes before the highest again.
// Bits past what went are ignored, as is a body after an ack beyond it.
func (c *netConn) onSack(ack uint32, body []byte) {
	if seqLT(c.sndSent, ack) {
		return
	}
	top := c.sndUna
	for i, x := range body {
		for ; x != 0; x &= x - 1 {
			top = c.sacked(ack+1+uint32(8*i+bits.TrailingZeros8(x)), top)
		}
	}
	c.resendHoles(top)
}

// sacked marks frame s as the peer's, if it went and is not yet
// acknowledged, and returns the highest such frame: s, or top.
func (c *netConn) sacked(s, top uint32) uint32 {
	if !seqLT(s, c.sndSent) || seqLT(s, c.sndUna) {
		return top
	}
	c.tx[s&c.mask].sacked = true
	return max32(s, top)
}

// max32 returns the later of seqs a and b.
func max32(a, b uint32) uint32 {
	if seqLT(a, b) {
		return b
	}
	return a
}

// resendHoles sends again the frames before top that the peer does not
// have, each once a round trip after it went (the first cuts the
// congestion window: reduce).
func (c *netConn) resendHoles(top uint32) {
	d := c.dev
	for s := c.sndUna; seqLT(s, top); s++ {
		t := &c.tx[s&c.mask]
		// A hole goes again once a round trip after it went; once it has
		// gone again, only after the timeout, since the acknowledgements
		// that show it still missing may be older than its second send.
		wait := max(c.srtt, d.rtoMin/4)
		if t.retx {
			wait = c.estimate()
		}
		if t.sacked || d.now-t.sentAt < wait {
			continue
		}
		c.reduce(false) // once a recovery
		t.retx = true
		c.transmit(s, txFast)
	}
}

// sample folds a round-trip time into the estimate (RFC 6298) and sets
// the timeout from it.
func (c *netConn) sample(r uint64) {
	if c.srtt == 0 {
		c.srtt, c.rttvar = r, r/2
	} else {
		diff := c.srtt - r
		if r > c.srtt {
			diff = r - c.srtt
		}
		c.rttvar = (3*c.rttvar + diff) / 4
		c.srtt = (7*c.srtt + r) / 8
	}
	c.rto = c.estimate()
}

// estimate is the retransmission timeout the round-trip estimate gives,
// between engine_net_rto_min and engine_net_rto_max (the initial timeout
// before a sample).
func (c *netConn) estimate() uint64 {
	d := c.dev
	if c.srtt == 0 {
		return d.rtoInit
	}
	return min(max(c.srtt+4*c.rttvar, d.rtoMin), d.rtoMax)
}

// timeout handles the retransmission timer: the oldest frame not
// acknowledged goes again, with the holes the peer's selective
// acknowledgements show before its highest (up to engine_net_rto_burst
// frames), and the timeout doubles. Frames past what the peer has said
// anything of are not guessed at: the acknowledgement of the first tells
// of them. No progress for engine_net_peer_timeout makes the peer dead,
// counted from when this rank last took up the wait: a timer that fires
// a pause late found a rank that was not polling (and, serial, not
// retransmitting), so the peer had not been asked meanwhile.
func (c *netConn) timeout() {
	d := c.dev
	if d.now-c.rtoAt >= d.pause() {
		c.askedFrom = max(c.askedFrom, d.now)
	}
	if c.sndUna == c.sndSent {
		// Nothing outstanding: the sender waits for credit, and the
		// acknowledgement that brings it may have been lost. Ask, once
		// a round trip's timeout, without backing off: a receiver slow
		// to make room is no sign of loss. It is dead only if it answers
		// nothing.
		switch {
		case seqLT(c.sndNxt, c.sndLimit):
			c.rtoAt = 0 // credit came; Reserve will go on
		case d.now-max(c.heard, c.askedFrom) >= d.peerTimeout:
			c.fail(d.now, "no answer to credit probes for %v", d.peerTimeoutD)
		default:
			c.sendAck(nic.FlagAckNow)
			c.rtoAt = d.now + c.estimate()
		}
		return
	}
	if d.now-max(c.progressAt, c.askedFrom) >= d.peerTimeout {
		c.fail(d.now, "nothing acknowledged for %v", d.peerTimeoutD)
		return
	}
	d.timeouts.Inc()
	c.reduce(true)
	if c.backoff < d.rtoBackoff {
		c.backoff++
		c.rto = min(c.rto*2, d.rtoMax)
	}
	c.rtoAt = d.now + c.rto
	// Every frame not known to have arrived goes again, oldest first, up
	// to the burst and the congestion window the timeout left: the last
	// frames of a burst, lost, have no later frame whose acknowledgement
	// would show them missing, so only the timer finds them, and one a
	// timeout would take a timeout each.
	sent, burst := 0, min(d.rtoBurst, int(c.cwnd))
	for s := c.sndUna; seqLT(s, c.sndSent) && sent < burst; s++ {
		t := &c.tx[s&c.mask]
		if t.sacked {
			continue
		}
		t.retx = true
		if !c.transmit(s, txTimeout) {
			break
		}
		sent++
	}
}

// onData takes data frame f (seq, the packet in data) into the reorder
// window; it reports whether it kept the frame.
func (c *netConn) onData(seq uint32, flags nic.Flags, f nic.Frame, data []byte) bool {
	d := c.dev
	c.dataAt = d.now
	c.ackOwed++
	if flags&nic.FlagAckNow != 0 {
		c.ackNow = true
	}
	if seqLT(seq, c.rcvNxt) {
		d.dupes.Inc()
		c.ackNow = true // the peer missed an acknowledgement
		return false
	}
	if !seqLT(seq, c.dlvNxt+c.window) {
		d.outOfWindow.Inc()
		return false
	}
	s := &c.rx[seq&c.mask]
	if s.have {
		d.dupes.Inc()
		return false
	}
	k := packets(data)
	if k < 0 {
		// The frame still counts as received, and delivers nothing: its
		// bytes are dropped too, so that Packet's cursor steps over it
		// as over an empty frame rather than reading them as packets.
		d.malformed.Inc()
		k, data = 0, nil
	}
	*s = rxSlot{frame: f, data: data, left: k, have: true}
	if seq != c.rcvNxt {
		c.ooo++
		c.ackNow = true // a hole: the sender learns of it at once
		return true
	}
	end := c.dlvNxt + c.window
	for c.rcvNxt != end && c.rx[c.rcvNxt&c.mask].have {
		c.rcvNxt++
		if c.rcvNxt != seq+1 {
			c.ooo--
		}
	}
	c.moved()
	d.markReady(c)
	return true
}

// packets returns how many packets frame payload b holds, or -1 if its
// lengths do not add up to it (or a packet is empty).
func packets(b []byte) int {
	k := 0
	for off := 0; off < len(b); k++ {
		if off+pktLen > len(b) {
			return -1
		}
		n := int(binary.LittleEndian.Uint16(b[off:]))
		off += pktLen + n
		if n == 0 || off > len(b) {
			return -1
		}
	}
	return k
}

// Peek returns how many packets, up to max, are ready in order. Frames
// that carry nothing (malformed) at the front are given back first.
func (c *netConn) Peek(max int) (int, error) {
	for c.dlvNxt != c.rcvNxt && c.rx[c.dlvNxt&c.mask].left == 0 {
		c.releaseFrame()
	}
	n := 0
	for s := c.dlvNxt; s != c.rcvNxt && n < max; s++ {
		n += c.rx[s&c.mask].left
	}
	c.curI, c.curSeq, c.curOff = 0, c.dlvNxt, c.dlvOff
	return min(n, max), nil
}

// Packet returns the i-th packet ready. The engine asks for them in
// order, which the cursor walks; any other order walks from the first.
func (c *netConn) Packet(i int) []byte {
	if i < c.curI {
		c.curI, c.curSeq, c.curOff = 0, c.dlvNxt, c.dlvOff
	}
	for ; c.curI < i; c.curI++ {
		c.next()
	}
	b := c.rx[c.curSeq&c.mask].data[c.curOff:]
	n := int(binary.LittleEndian.Uint16(b))
	return b[pktLen : pktLen+n]
}

// next moves the cursor past its packet, to the next frame's first when
// it was its frame's last.
func (c *netConn) next() {
	s := &c.rx[c.curSeq&c.mask]
	c.curOff += pktLen + int(binary.LittleEndian.Uint16(s.data[c.curOff:]))
	for c.curOff == len(s.data) && c.curSeq != c.rcvNxt {
		c.curSeq++
		c.curOff = 0
		s = &c.rx[c.curSeq&c.mask]
	}
}

// Release gives the first k packets back, and their frames once all
// their packets are. Once half the credit has opened since the last
// advertisement, or the peer has little of it left, it hears at once.
func (c *netConn) Release(k int) {
	if k == 0 {
		return
	}
	for k > 0 {
		s := &c.rx[c.dlvNxt&c.mask]
		if k >= s.left {
			k -= s.left
			c.releaseFrame()
			continue
		}
		for ; k > 0; k-- {
			c.dlvOff += pktLen + int(binary.LittleEndian.Uint16(s.data[c.dlvOff:]))
			s.left--
		}
	}
	c.dev.flushReleased()
	if limit := c.dlvNxt + c.credit; limit-c.advLimit >= c.credit/2 || c.advLimit-c.rcvNxt <= c.credit/4 {
		c.ackNow = true
		c.dev.touch(c)
	}
}

// releaseFrame gives back frame dlvNxt, whose packets are all released.
func (c *netConn) releaseFrame() {
	s := &c.rx[c.dlvNxt&c.mask]
	c.dev.release(s.frame)
	*s = rxSlot{}
	c.dlvNxt++
	c.dlvOff = 0
}

// RoomWanted is false: a network peer never parks waiting for our room.
func (c *netConn) RoomWanted() bool { return false }

// close gives back every frame the connection holds.
func (c *netConn) close() {
	d := c.dev
	c.open = false
	for s := c.sndUna; s != c.sndNxt; s++ {
		d.release(c.tx[s&c.mask].frame)
	}
	for i := range c.rx {
		if c.rx[i].have {
			d.release(c.rx[i].frame)
			c.rx[i] = rxSlot{}
		}
	}
	c.sndUna, c.sndSent = c.sndNxt, c.sndNxt
	d.flushReleased()
	if c.dead == nil {
		c.dead = errors.New("network transport closed")
	}
}

// pause is the gap in a rank's looks at a peer (its Checks, its timer's
// lateness) after which it counts the peer's silence afresh: half the
// peer timeout, and no less than a probe interval: a rank that looks
// at least that often while it waits (a loaded machine's too) finds a
// dead peer within the timeout, and one back from idle gives the peer
// at least half a timeout from its first probe.
func (d *netDev) pause() uint64 { return max(d.probeEvery, d.peerTimeout/2) }
