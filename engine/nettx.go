package engine

import (
	"github.com/tachyon-hpc/tachyon/cvar"
	"github.com/tachyon-hpc/tachyon/nic"
	"github.com/tachyon-hpc/tachyon/pvar"
)

// The transmit batch: the frames a device sends during one poll (its
// pump, the handling of what came, the sends queued for room, its
// service) go to the link together, in one link.Send, so that an AF_XDP
// link wakes the kernel once for them all and a UDP link sends them
// with one sendmmsg, where a frame at a time cost a system call each.
//
//   - The pump opens the batch; the service closes it, handing the link
//     what it holds. Between them, transmit queues a frame (stamped and
//     tagged as it would go at once) and counts it sent; a frame already
//     queued is not queued again.
//   - A batch of engine_net_tx_batch frames goes at once, and a new one
//     opens: a batch bounds how long its first frame waits.
//   - Outside a poll, a frame goes at once (a ping-pong's: nothing is
//     added to its latency), except the frames a burst of sends fills
//     while earlier ones are in flight: they wait, sealed, for the frame
//     left open behind them (Wake, the next poll, the keeper), up to
//     engine_net_tx_batch of them, and go with it (netConn.seal).
//   - The frames the link does not take are handled as a single frame's
//     refusal is: a data frame stays kept and goes again from flush or
//     the timer (a first send is no longer counted sent: sndSent goes
//     back to it), the connection owes an acknowledgement again (the
//     stamp did not go), an error is logged once a peer; an
//     acknowledgement on its own is given back.

// The control variables of the transmit batch and of a burst's frames.
var (
	netTxBatch = cvar.NewInt("engine_net_tx_batch", 32,
		"Most frames a rank hands its network link in one send (one wake-up of an AF_XDP socket's kernel side, one sendmmsg of a UDP link): the frames one poll sends go together, and so do those a burst of sends fills while earlier frames are in flight, up to this many (but see engine_net_burst_packets). 1 sends each frame on its own.",
		cvar.WithCategory("engine"), cvar.WithRange(1, 1024), cvar.WithUnit("frames"))
	netBurstPackets = cvar.NewInt("engine_net_burst_packets", 12,
		"Packets (small messages) a frame filled by a burst of sends must carry to go at once, with the frames held before it, rather than wait for engine_net_tx_batch frames or the next poll: its send is paid for by that many messages, and the peer starts on them while the burst goes on. A frame of fewer (larger messages) is held for the batch. 0 holds every frame.",
		cvar.WithCategory("engine"), cvar.WithRange(0, 1<<16), cvar.WithUnit("packets"))
	netBurstBytes = cvar.NewInt("engine_net_burst_bytes", 3072,
		"Bytes of packets after which a frame being filled by a burst of sends, once it carries engine_net_burst_packets, goes without waiting to fill: on a link of jumbo frames a window of small messages would otherwise fit one frame, which the peer gets only when the burst ends. At the defaults, a frame of messages of up to about 250 bytes goes before it outgrows one 4 KiB buffer of an AF_XDP receiver, where a larger frame spans several, gathered by a copy.",
		cvar.WithCategory("engine"), cvar.WithRange(64, 1<<16), cvar.WithUnit("bytes"))
)

// pvNetTxSends counts the sends to the link, for the frames a send carries.
var pvNetTxSends = pvar.NewCounter("engine_net_tx_sends",
	"Sends of frames to the network link (each at most one wake-up of the kernel, or one system call): the frames sent (engine_net_data_frames, engine_net_acks, the retransmissions) over this is the frames a send carries.",
	pvar.WithUnit("calls"), pvar.WithBind(pvar.BindComm))

// txKind is what a queued frame is.
type txKind uint8

const (
	txData    txKind = iota // a data frame's first send
	txFast                  // a data frame sent again for a hole (fast retransmit)
	txTimeout               // a data frame sent again at a timeout
	txAck                   // an acknowledgement on its own
	txControl               // another frame that is not kept: bye, clock
)

// txWork is what the device does for a queued frame once the link has
// taken it or not.
type txWork struct {
	c     *netConn
	seq   uint32 // a data frame's
	kind  txKind
	first bool   // a data frame that became the first outstanding (transmit)
	was   uint64 // a data frame's sentAt before: restored if the link refuses it
}

// txBatch is the device's transmit batch.
type txBatch struct {
	on   bool
	max  int
	desc []nic.TxDesc
	work []txWork

	burstPackets int // engine_net_burst_packets: a burst's frame of this many goes at once (0: never)
	burstBytes   int // engine_net_burst_bytes: ... once it holds this many bytes of them
}

// newTxBatch makes a closed batch of engine_net_tx_batch frames.
func newTxBatch() txBatch {
	n := int(netTxBatch.Get())
	return txBatch{max: n, desc: make([]nic.TxDesc, 0, n), work: make([]txWork, 0, n),
		burstPackets: int(netBurstPackets.Get()), burstBytes: int(netBurstBytes.Get())}
}

// goesNow reports whether a frame of pkts packets, sealed while earlier
// frames are in flight, goes at once with those held before it.
func (b *txBatch) goesNow(pkts int) bool { return b.burstPackets > 0 && pkts >= b.burstPackets }

// openTx opens the transmit batch; sendTx or closeTx hands it to the
// link.
func (d *netDev) openTx() { d.tx.on = d.tx.max > 1 }

// closeTx hands the link what the batch holds and closes it: frames go
// at once again.
func (d *netDev) closeTx() {
	d.sendTx()
	d.tx.on = false
}

// queue adds frame t, described by w, to the batch, which goes once
// full.
func (d *netDev) queue(t nic.TxDesc, w txWork) {
	d.tx.desc = append(d.tx.desc, t)
	d.tx.work = append(d.tx.work, w)
	if len(d.tx.desc) == d.tx.max {
		d.sendTx()
	}
}

// sendTx hands the link the frames of the batch in one Send, and the
// rest again after one it refused with an error (a kept frame still in
// flight, say): a full queue refuses all that follow.
func (d *netDev) sendTx() {
	q, w := d.tx.desc, d.tx.work
	for len(q) > 0 {
		n, err := d.link.Send(q)
		d.txSends.Inc()
		now := d.clock()
		d.now = now // later than the pump's reading: ages computed against it stay positive
		for i := range n {
			w[i].c.sent(&w[i], q[i].Frame, now)
		}
		if n == len(q) {
			break
		}
		if err == nil {
			for i := n; i < len(q); i++ {
				w[i].c.refused(&w[i], q[i].Frame, nil)
			}
			break
		}
		w[n].c.refused(&w[n], q[n].Frame, err)
		// The rest goes again, less the first sends of a connection that
		// no longer counts them sent.
		k := 0
		for i := n + 1; i < len(q); i++ {
			if x := &w[i]; x.kind == txData && !seqLT(x.seq, x.c.sndSent) {
				x.c.refused(x, q[i].Frame, nil)
				continue
			}
			q[k], w[k] = q[i], w[i]
			k++
		}
		q, w = q[:k], w[:k]
	}
	clear(d.tx.work) // no connection held past the batch
	d.tx.desc, d.tx.work = d.tx.desc[:0], d.tx.work[:0]
}

// transmit sends frame seq (kind: a first send or which retransmission),
// stamped (and tagged) afresh, or queues it in the open batch, and
// reports whether the link took it (queued: whether it will be offered;
// sendTx finishes it). A frame already queued is not queued twice.
func (c *netConn) transmit(seq uint32, kind txKind) bool {
	d := c.dev
	s := &c.tx[seq&c.mask]
	if s.queued {
		return true
	}
	b := d.link.Bytes(s.frame)
	c.stamp(b)
	if d.sealer != nil {
		d.sealer.seal(b[:s.n])
	}
	t := nic.TxDesc{Frame: s.frame, Len: s.n, Peer: c.peer, Keep: true}
	w := txWork{c: c, seq: seq, kind: kind, first: seq == c.sndSent && seq == c.sndUna, was: s.sentAt}
	if d.tx.on {
		// Queued as if it went now: resendHoles waits a round trip from
		// it, not from its last send.
		s.queued, s.sentAt = true, d.now
		d.queue(t, w)
		return true
	}
	c.txd[0] = t
	n, err := d.link.Send(c.txd[:])
	d.txSends.Inc()
	if n == 0 {
		c.refused(&w, t.Frame, err)
		return false
	}
	now := d.clock()
	d.now = now
	c.sent(&w, t.Frame, now)
	return true
}

// sent finishes frame f, described by w, which the link took at now.
func (c *netConn) sent(w *txWork, f nic.Frame, now uint64) {
	d := c.dev
	switch w.kind {
	case txAck:
		d.sentAcks.Inc()
		return
	case txControl:
		return
	case txFast:
		d.fastRetx.Inc()
	case txTimeout:
		d.retx.Inc()
	}
	s := &c.tx[w.seq&c.mask]
	s.queued = false
	s.sentAt = now
	if w.first {
		// The first frame outstanding: the peer is waited on from now,
		// not from its last acknowledgement, however long ago.
		c.progressAt = now
	}
	if c.rtoAt == 0 {
		c.rtoAt = now + c.rto
		d.armed(c, c.rtoAt)
	}
}

// refused undoes what counting frame f (described by w) sent did, when
// the link did not take it because of err (nil: a full queue).
func (c *netConn) refused(w *txWork, f nic.Frame, err error) {
	d := c.dev
	c.sendFailed(err)
	c.ackNow = true // what the stamp said did not go
	d.touch(c)
	switch w.kind {
	case txAck, txControl:
		d.ackFrame[0] = f
		d.link.Release(d.ackFrame[:])
		return
	}
	s := &c.tx[w.seq&c.mask]
	s.queued = false
	s.sentAt = w.was
	if w.kind == txData && seqLT(w.seq, c.sndSent) {
		// Not sent after all, nor any first send after it: flush or the
		// timer sends them again.
		c.sndSent = w.seq
		d.coalesced(c)
	}
}
