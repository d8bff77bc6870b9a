package engine

import (
	"fmt"
	"net/netip"
	"runtime"
	"slices"
	"sync/atomic"
	"time"

	"github.com/tachyon-hpc/tachyon/asm"
	"github.com/tachyon-hpc/tachyon/cvar"
	"github.com/tachyon-hpc/tachyon/nic"
	"github.com/tachyon-hpc/tachyon/progress"
	"github.com/tachyon-hpc/tachyon/pvar"
)

// Control variables of the network transport, read when an endpoint
// opens its device.
var (
	netWindow = cvar.NewInt("engine_net_window", 256,
		"Frames a rank may have sent to a network peer and not yet had acknowledged (a power of two): also how many the receiver holds out of order. Bounds a peer's memory and what one round trip carries.",
		cvar.WithCategory("engine"), cvar.WithRange(16, 1<<15), cvar.WithUnit("frames"))
	netAckEvery = cvar.NewInt("engine_net_ack_every", 16,
		"Frames received from a network peer after which an acknowledgement goes back on its own, if no frame to that peer carried one.",
		cvar.WithCategory("engine"), cvar.WithRange(1, 1<<15), cvar.WithUnit("frames"))
	netAckDelay = cvar.NewDuration("engine_net_ack_delay", 50*time.Microsecond,
		"Longest a received frame waits for a frame to its sender to carry its acknowledgement before one goes on its own.",
		cvar.WithCategory("engine"), cvar.WithRange(0, int64(time.Second)))
	netRTOMin = cvar.NewDuration("engine_net_rto_min", 200*time.Microsecond,
		"Shortest retransmission timeout to a network peer, whatever the measured round trip.",
		cvar.WithCategory("engine"), cvar.WithRange(int64(time.Microsecond), int64(time.Minute)))
	netRTOMax = cvar.NewDuration("engine_net_rto_max", 100*time.Millisecond,
		"Longest retransmission timeout to a network peer: where doubling after each timeout in a row stops.",
		cvar.WithCategory("engine"), cvar.WithRange(int64(time.Microsecond), int64(time.Hour)))
	netRTOInit = cvar.NewDuration("engine_net_rto_initial", time.Millisecond,
		"Retransmission timeout to a network peer before its round trip is measured.",
		cvar.WithCategory("engine"), cvar.WithRange(int64(time.Microsecond), int64(time.Minute)))
	netRTOBurst = cvar.NewInt("engine_net_rto_burst", 16,
		"Oldest frames not acknowledged (nor acknowledged selectively) that a retransmission timeout sends again at once; later holes go as acknowledgements show them.",
		cvar.WithCategory("engine"), cvar.WithRange(1, 1<<15), cvar.WithUnit("frames"))
	netRTOBackoff = cvar.NewInt("engine_net_rto_backoff", 2,
		"Most times the retransmission timeout to a network peer doubles in a row (timeouts with no progress between): a lossy network loses retransmissions too, and each doubling more would stretch its recovery, while engine_net_rto_max still bounds the timeout.",
		cvar.WithCategory("engine"), cvar.WithRange(0, 30), cvar.WithUnit("doublings"))
	netStallTimeout = cvar.NewDuration("engine_net_stall_timeout", time.Minute,
		"How long a transfer with a network peer (frames unacknowledged, packets waiting for room, a hole in what came, bulk lane data due) may go without moving while the peer still answers, before it counts as stalled: its operations then fail with an error that names the transfer, rather than waiting for ever. A peer that computes this long without calling into the library while this rank sends to it stalls the transfer too.",
		cvar.WithCategory("engine"), cvar.WithRange(int64(time.Millisecond), int64(24*time.Hour)))
	netPeerTimeout = cvar.NewDuration("engine_net_peer_timeout", 30*time.Second,
		"How long a network peer may leave frames unacknowledged, or stay silent while this rank waits on it, before it counts as dead and every operation involving it fails. A peer answers only while it calls into the library (or runs the progress engine's goroutine): one that computes longer than this while others wait on it counts as dead.",
		cvar.WithCategory("engine"), cvar.WithRange(int64(time.Millisecond), int64(24*time.Hour)))
	netLinger = cvar.NewDuration("engine_net_linger", 2*time.Second,
		"Longest an endpoint closing waits for its network peers to acknowledge what it sent, retransmitting what was lost, before it goes (at most engine_net_peer_timeout).",
		cvar.WithCategory("engine"), cvar.WithRange(0, int64(time.Hour)))
	netByeCopies = cvar.NewInt("engine_net_bye_copies", 3,
		"Copies of the frame that tells each network peer this endpoint is closing: it is not retransmitted, and a peer that loses every copy learns of the close only after engine_net_peer_timeout (at 5% loss, 3 copies leave that to one close in 8,000). Read when an endpoint closes.",
		cvar.WithCategory("engine"), cvar.WithRange(1, 64), cvar.WithUnit("frames"))
	netProbeEvery = cvar.NewDuration("engine_net_probe_interval", 500*time.Millisecond,
		"Silence from a network peer after which a rank waiting on operations asks it for an acknowledgement, to tell a quiet peer from a dead one.",
		cvar.WithCategory("engine"), cvar.WithRange(int64(time.Millisecond), int64(time.Hour)))
	netKeeperIdle = cvar.NewDuration("engine_net_keeper_idle", time.Millisecond,
		"How often an endpoint's keeper (the goroutine that retransmits, and sends frames left open, for a rank that has stopped polling) looks for work when no timer runs: also the longest a frame left open by a burst of sends with no poll after it can wait.",
		cvar.WithCategory("engine"), cvar.WithRange(int64(time.Microsecond), int64(time.Minute)))
	netCoalesceMax = cvar.NewDuration("engine_net_coalesce_max", 50*time.Microsecond,
		"Longest a frame left open for more packets (sent while earlier frames to the peer were in flight) waits when the rank stops polling: the keeper sends it then. A rank that polls sends it at its next poll.",
		cvar.WithCategory("engine"), cvar.WithRange(int64(time.Microsecond), int64(time.Second)))
	netEagerLimit = cvar.NewInt("engine_net_eager_limit", 8<<10,
		"Largest message sent eagerly to a rank on another host, when smaller than engine_eager_limit; larger ones go by rendezvous, their data over the bulk lane. An eager message costs the sending CPU a frame per link MTU of payload (1.4 KiB on a standard Ethernet, 8.9 KiB on a 9000-byte one), a rendezvous one a round trip first and then a TCP segment per 64 KiB on the lane, so the limit sits where the two cost alike (docs/network.md has the measurements). Read when a rank joins.",
		cvar.WithCategory("engine"), cvar.WithRange(1, 1<<30), cvar.WithUnit("bytes"))
	netPollMax = cvar.NewDuration("engine_net_poll_max", time.Millisecond,
		"Longest a rank with operations in flight over the network parks between looks at its link: a NIC rings no doorbell, so this bounds how late a frame is noticed by an idle rank.",
		cvar.WithCategory("engine"), cvar.WithRange(int64(time.Microsecond), int64(time.Second)))
)

// Performance variables of the network transport.
var (
	pvNetLinkMode = pvar.NewState("engine_net_link_mode",
		"The mode a rank's network link runs in: 0 xdp-zerocopy (AF_XDP bound zero-copy), 1 xdp-copy (AF_XDP copying frames), 2 udp (the kernel's UDP sockets); a rank's value is the slowest of its links, the process's the slowest of all, -1 with no network link. It is this end's link alone: engine_net_path is the path to the peers, slower where a peer's link is.",
		linkModes, pvar.WithBind(pvar.BindComm))
	pvNetData       = pvar.NewCounter("engine_net_data_frames", "Data frames sent to network peers, each once however often it went.", pvar.WithUnit("frames"), pvar.WithBind(pvar.BindComm))
	pvNetAcks       = pvar.NewCounter("engine_net_acks", "Acknowledgement frames sent on their own (not carried by data).", pvar.WithUnit("frames"), pvar.WithBind(pvar.BindComm))
	pvNetRetx       = pvar.NewCounter("engine_net_retransmits", "Frames sent again after a retransmission timeout.", pvar.WithUnit("frames"), pvar.WithBind(pvar.BindComm))
	pvNetFastRetx   = pvar.NewCounter("engine_net_fast_retransmits", "Frames sent again because an acknowledgement showed a later frame arrived and they did not.", pvar.WithUnit("frames"), pvar.WithBind(pvar.BindComm))
	pvNetTimeouts   = pvar.NewCounter("engine_net_timeouts", "Retransmission timeouts.", pvar.WithUnit("timeouts"), pvar.WithBind(pvar.BindComm))
	pvNetDupes      = pvar.NewCounter("engine_net_duplicates", "Data frames received again and dropped.", pvar.WithUnit("frames"), pvar.WithBind(pvar.BindComm))
	pvNetWindow     = pvar.NewCounter("engine_net_out_of_window", "Data frames received beyond the receive window and dropped.", pvar.WithUnit("frames"), pvar.WithBind(pvar.BindComm))
	pvNetStale      = pvar.NewCounter("engine_net_stale_frames", "Frames of another incarnation of their sender (epoch), dropped.", pvar.WithUnit("frames"), pvar.WithBind(pvar.BindComm))
	pvNetForeign    = pvar.NewCounter("engine_net_foreign_frames", "Frames for another endpoint or from a rank that is no network peer, dropped.", pvar.WithUnit("frames"), pvar.WithBind(pvar.BindComm))
	pvNetMalformed  = pvar.NewCounter("engine_net_malformed_frames", "Frames whose Tachyon header was malformed (type, flags, length), dropped.", pvar.WithUnit("frames"), pvar.WithBind(pvar.BindComm))
	pvNetKeeper     = pvar.NewCounter("engine_net_keeper_runs", "Times an endpoint's keeper ran the retransmission timers for a rank that was not polling.", pvar.WithUnit("runs"), pvar.WithBind(pvar.BindComm))
	pvNetPeerDeaths = pvar.NewCounter("engine_net_peer_deaths", "Network peers found dead: nothing acknowledged or heard for engine_net_peer_timeout, or closed.", pvar.WithUnit("peers"), pvar.WithBind(pvar.BindComm))
	pvNetStalls     = pvar.NewCounter("engine_net_stalls", "Transfers with network peers that did not move for engine_net_stall_timeout while the peer answered: the peer's operations failed.", pvar.WithUnit("transfers"), pvar.WithBind(pvar.BindComm))
	pvNetSendErrs   = pvar.NewCounter("engine_net_send_errors", "Frames the link refused to send with an error (not a full queue): each goes again, as a lost frame would.", pvar.WithUnit("frames"), pvar.WithBind(pvar.BindComm))
	countNet        = newTransportCounters("net")
)

// netDev is an endpoint's network device: one nic.Link that the
// connections to every network peer share, the demultiplexing of what it
// receives, and the connections' timers. The endpoint's lock guards it;
// its pump runs at the start of every poll.
type netDev struct {
	link   nic.Link
	cookie uint64
	self   uint32 // this endpoint's rank
	epoch  uint32 // this endpoint's incarnation
	window uint32
	conns  []*netConn // by rank; nil where the peer is not on the network
	paths  []int8     // by rank: the path to the peer (netpath.go), pathNone for none
	list   []*netConn // every connection, begun or not, for close
	live   []*netConn // the connections begun (netConn.begin), to share credit among

	// What the polls walk (network.go): the connections with work.
	work   []*netConn
	ready  []*netConn
	lanes  []*netConn
	timers netTimers
	later  []*netConn // timers still due after a service handled them, pushed back after its pass
	share  uint32     // a begun connection's credit (shareCredit)

	now      uint64 // the clock at the last pump (or send)
	pumped   uint64 // the clock at the last pump
	rx       []nic.RxDesc
	rel      []nic.Frame // frames to give back to the link, batched
	ackFrame [1]nic.Frame
	ackTx    [1]nic.TxDesc
	one      [1]nic.Frame // Reserve's
	sackBuf  []byte       // an acknowledgement's body (netConn.sackBody): a bit a frame of the window
	polls    *uint64      // the endpoint's count of polls (Endpoint.polls), for Wake
	due      uint64       // the earliest timer of any connection (0: none), for NextDue (asm loads and relaxed stores)
	rtoDue   uint64       // the earliest retransmission timer (0: none), for the keeper (likewise)
	flushDue uint64       // when a frame left open for more packets must go (0: none), for the keeper (likewise)
	stop     atomic.Bool
	kept     chan struct{} // closed when the keeper has stopped
	job      []byte        // the job key (nil: frames are not authenticated)
	sealer   *frameSealer  // tags this endpoint's frames (nil: none)
	trailer  int           // bytes of the trailer a frame ends in (0 or authTrailer)
	bulk     *bulkDev      // the bulk lane (nil: off)
	cc       ccConfig      // congestion control and credit (netcc.go)
	tx       txBatch       // the frames this poll sends (nettx.go)
	txSends  *pvar.CounterShard
	clk      netClock // steering this process's clock (netclock.go)

	ackEvery                     int
	rtoBurst                     int
	ackDelay, rtoMin, rtoMax     uint64 // clock counts
	rtoInit, peerTimeout         uint64
	rtoBackoff                   uint
	stallTimeout                 uint64
	stallTimeoutD                time.Duration
	stalls, sendErrs             *pvar.CounterShard
	probeEvery, pollMax, linger  uint64
	coalesceMax                  uint64
	peerTimeoutD                 time.Duration
	sentData, sentAcks, retx     *pvar.CounterShard
	fastRetx, timeouts, dupes    *pvar.CounterShard
	outOfWindow, stale, foreign  *pvar.CounterShard
	malformed, deaths, kicks     *pvar.CounterShard
	authFail, replays            *pvar.CounterShard
	mode                         *pvar.StateShard // the link's mode (linkModes)
	path                         *pvar.StateShard // the slowest path to a network peer (netpath.go); nil before the first
	keepIdle, keepMin, keepSlice time.Duration
	lingerUntil                  time.Time // CloseContext's deadline for close's linger; zero: engine_net_linger alone
}

// newNetDev makes the device of the endpoint of rank self, incarnation
// epoch, in a world of n ranks, over link, for frames with cookie,
// authenticated under job key if it is not nil. The device owns link
// from then on.
func newNetDev(link nic.Link, cookie uint64, self, epoch uint32, n int, key []byte) (*netDev, error) {
	if err := checkJobKey(key); err != nil {
		return nil, err
	}
	w := uint32(netWindow.Get())
	if w&(w-1) != 0 {
		return nil, fmt.Errorf("%w: engine_net_window %d is not a power of two", ErrConfig, w)
	}
	trailer := 0
	if key != nil {
		trailer = authTrailer
	}
	if link.MTU()-nic.HeaderLen-trailer < minPacket {
		return nil, fmt.Errorf("%w: the link's MTU %d leaves less than a %d-byte packet", ErrConfig, link.MTU(), minPacket)
	}
	c := func(d time.Duration) uint64 { return max(progress.SecondsToCounts(d.Seconds()), 1) }
	d := &netDev{
		link: link, cookie: cookie, self: self, epoch: epoch, window: w,
		conns:    make([]*netConn, n),
		work:     make([]*netConn, 0, n),
		ready:    make([]*netConn, 0, n),
		lanes:    make([]*netConn, 0, n),
		later:    make([]*netConn, 0, n),
		timers:   netTimers{h: make([]*netConn, 0, n)},
		paths:    slices.Repeat([]int8{pathNone}, n),
		rx:       make([]nic.RxDesc, 64),
		rel:      make([]nic.Frame, 0, 2*int(w)+64),
		sackBuf:  make([]byte, min(int(w)/8, link.MTU()-nic.HeaderLen-trailer)),
		ackEvery: int(netAckEvery.Get()), rtoBurst: int(netRTOBurst.Get()),
		ackDelay: c(netAckDelay.Get()), rtoMin: c(netRTOMin.Get()), rtoMax: c(netRTOMax.Get()),
		rtoInit: c(netRTOInit.Get()), peerTimeout: c(netPeerTimeout.Get()),
		probeEvery: c(netProbeEvery.Get()), pollMax: c(netPollMax.Get()),
		linger: c(min(netLinger.Get(), netPeerTimeout.Get())), coalesceMax: c(netCoalesceMax.Get()),
		peerTimeoutD: netPeerTimeout.Get(),
		rtoBackoff:   uint(netRTOBackoff.Get()), stallTimeout: c(netStallTimeout.Get()), stallTimeoutD: netStallTimeout.Get(),
		stalls: pvNetStalls.Shard(), sendErrs: pvNetSendErrs.Shard(),
		sentData: pvNetData.Shard(), sentAcks: pvNetAcks.Shard(), retx: pvNetRetx.Shard(),
		fastRetx: pvNetFastRetx.Shard(), timeouts: pvNetTimeouts.Shard(), dupes: pvNetDupes.Shard(),
		outOfWindow: pvNetWindow.Shard(), stale: pvNetStale.Shard(), foreign: pvNetForeign.Shard(),
		malformed: pvNetMalformed.Shard(), deaths: pvNetPeerDeaths.Shard(), kicks: pvNetKeeper.Shard(),
		authFail: pvNetAuthFail.Shard(), replays: pvNetReplays.Shard(),
		job: key, trailer: trailer, tx: newTxBatch(), txSends: pvNetTxSends.Shard(),
		keepIdle: netKeeperIdle.Get(), keepMin: netRTOMin.Get(), keepSlice: netCoalesceMax.Get(),
		kept: make(chan struct{}), polls: new(uint64),
	}
	if key != nil {
		aead, err := frameAEAD(key, self, epoch)
		if err != nil {
			return nil, fmt.Errorf("%w: the frame key: %v", ErrConfig, err)
		}
		d.sealer = &frameSealer{aead: aead}
	}
	d.mode = pvNetLinkMode.Shard()
	d.mode.Set(linkMode(link.Status()))
	d.cc = newCCConfig(w, link.Status().RxCapacity, c)
	d.now = d.clock()
	d.shareCredit()
	return d, nil
}

// linkModes names the modes of a network link, from the fastest to the
// slowest, as engine_net_link_mode reads them.
var linkModes = []string{"xdp-zerocopy", "xdp-copy", "udp"}

// linkMode returns the index in linkModes of the mode of a link set up as
// st says.
func linkMode(st nic.Status) int {
	switch {
	case st.Mode == nic.ModeXDP && st.ZeroCopy:
		return 0
	case st.Mode == nic.ModeXDP:
		return 1
	}
	return 2
}

// attachNet makes dev ep's network device and starts its keeper. It
// returns what stops and closes them when ep closes.
func (ep *Endpoint) attachNet(dev *netDev) func() {
	dev.own(ep.owner)
	ep.net = dev
	dev.polls = &ep.polls
	go dev.keep(ep)
	return func() {
		dev.stop.Store(true)
		<-dev.kept
		ep.lock()
		dev.close()
		ep.unlock()
	}
}

// deviceCounter is one of a device's counters: the shard it writes and
// the variable the shard is part of.
type deviceCounter struct {
	shard **pvar.CounterShard
	of    *pvar.Counter
}

// counters lists the device's counters and its bulk lane's.
func (d *netDev) counters() []deviceCounter {
	cs := []deviceCounter{
		{&d.sentData, pvNetData}, {&d.sentAcks, pvNetAcks}, {&d.retx, pvNetRetx},
		{&d.fastRetx, pvNetFastRetx}, {&d.timeouts, pvNetTimeouts}, {&d.dupes, pvNetDupes},
		{&d.outOfWindow, pvNetWindow}, {&d.stale, pvNetStale}, {&d.foreign, pvNetForeign},
		{&d.malformed, pvNetMalformed}, {&d.deaths, pvNetPeerDeaths}, {&d.kicks, pvNetKeeper},
		{&d.authFail, pvNetAuthFail}, {&d.replays, pvNetReplays},
		{&d.stalls, pvNetStalls}, {&d.sendErrs, pvNetSendErrs}, {&d.txSends, pvNetTxSends},
		{&d.cc.cwndCuts, pvNetCwndCuts}, {&d.cc.cwndStalls, pvNetCwndStalls}, {&d.cc.creditStalls, pvNetCreditStalls},
		{&d.cc.paceWaits, pvNetPaceWaits}, {&d.cc.paced, pvNetPaced},
	}
	if b := d.bulk; b != nil {
		cs = append(cs, deviceCounter{&b.msgs, pvNetBulkMsgs}, deviceCounter{&b.bytes, pvNetBulkBytes},
			deviceCounter{&b.refused, pvNetBulkRefused}, deviceCounter{&b.fallbacks, pvNetBulkFallbacks})
	}
	return cs
}

// own makes the device's counters its rank's, kept by o, so that they
// read per rank as the endpoint's own do: each shard newNetDev took is
// replaced by one of o's and closed, what it counted (the frames of the
// connection, if any) staying in the process's totals. It runs before the
// keeper starts, while only the caller touches the device.
func (d *netDev) own(o *pvar.Owner) {
	for _, c := range d.counters() {
		old := *c.shard
		*c.shard = c.of.ShardOf(o)
		old.Close()
	}
	old := d.mode
	d.mode = pvNetLinkMode.ShardOf(o)
	d.mode.Set(int(old.Load()))
	old.Close()
	if old := d.path; old != nil {
		d.path = pvNetPath.ShardOf(o)
		d.path.Set(int(old.Load()))
		old.Close()
	}
	d.cc.own(o)
}

// clock reads the progress clock without ordering (NowCoarse: a plain
// RDTSC, half the ordered read's cost, on a path read at every poll): the
// timers and round-trip samples it serves are microseconds long.
func (d *netDev) clock() uint64 { return progress.NowCoarse() }

// connect makes the connection to rank, which listens at card with
// incarnation epoch, and for its bulk lane at bulkPort (0: none): the
// card checked and the peer added to the link now, at bootstrap, the
// connection's windows, frame key and congestion state at its first
// frame either way (netConn.begin).
func (d *netDev) connect(rank int, card nic.Card, epoch uint32, bulkPort uint16) (*netConn, error) {
	p, err := d.link.AddPeer(card)
	if err != nil {
		return nil, fmt.Errorf("%w: rank %d at %v: %v", ErrConfig, rank, card, err)
	}
	c := newPeerConn(d, p, uint32(rank), epoch, d.clock())
	// Packets fit the smaller MTU of the two links, and a frame's u16
	// length, with the trailer.
	c.max = min(d.link.MTU(), int(card.MTU), 0xffff) - nic.HeaderLen - pktLen - d.trailer
	if c.max < minPacket {
		return nil, fmt.Errorf("%w: rank %d's MTU %d leaves less than a %d-byte packet", ErrConfig, rank, card.MTU, minPacket)
	}
	c.out.to = netip.AddrPortFrom(card.IP, bulkPort)
	d.conns[rank] = c
	d.paths[rank] = int8(d.notePath(card))
	d.list = append(d.list, c)
	return c, nil
}

// pump reads what the link received and hands it to the connections. It
// returns the frames read. The endpoint calls it at the start of a poll,
// and service at the end. It opens the transmit batch (nettx.go), which
// service closes: a caller that does not go on to service closes it.
func (d *netDev) pump() int {
	d.sendTx() // what an acknowledgement read now frees has gone
	d.openTx()
	d.now = d.clock()
	d.pumped = d.now
	n := 0
	for {
		k := d.link.Receive(d.rx)
		for i := range k {
			d.frame(&d.rx[i])
		}
		n += k
		if k < len(d.rx) {
			break
		}
	}
	d.flushReleased()
	return n
}

// service runs the timers due and the connections with work once the
// endpoint has handled what came: retransmissions, frames the link had
// no room for or pacing held, frames left open, acknowledgements owed
// (those the handling just made owed, with the window it just opened,
// included). It walks only those (network.go), however many peers the
// rank has. Then it hands the link the poll's frames (closeTx).
func (d *netDev) service() {
	d.link.Poll()
	pumped := false
	for t := d.timers.top(); t != 0 && d.now >= t; t = d.timers.top() {
		c := d.timers.pop()
		if c.dead != nil {
			continue
		}
		if c.rtoAt != 0 && d.now >= c.rtoAt && !pumped {
			// Acknowledgements may have come while the endpoint handled
			// packets and pushed data (a window takes hundreds of
			// microseconds): take them in before anything goes again.
			d.pump()
			pumped = true
		}
		if c.rtoAt != 0 && d.now >= c.rtoAt && c.dead == nil {
			c.timeout()
		}
		if c.ackOwed > 0 && c.ackAt != 0 && d.now >= c.ackAt && c.dead == nil {
			c.sendAck(0)
		}
		if t := earliest(c.rtoAt, c.ackAt); t != 0 && c.dead == nil {
			if t <= d.now {
				// Still due: the link had no frame for the
				// acknowledgement. The next service tries again.
				d.later = append(d.later, c)
			} else {
				d.timers.arm(c, t)
			}
		}
	}
	for _, c := range d.later {
		if t := earliest(c.rtoAt, c.ackAt); t != 0 && c.dead == nil {
			d.timers.arm(c, t)
		}
	}
	clear(d.later)
	d.later = d.later[:0]
	for i := 0; i < len(d.work); i++ {
		c := d.work[i]
		if c.dead != nil {
			continue
		}
		if c.sndSent != c.sndNxt || c.open {
			c.flush()
		}
		switch {
		case c.ackNow || c.ackOwed >= d.ackEvery:
			c.sendAck(0)
		case c.ackOwed > 0 && c.ackAt == 0:
			c.ackAt = d.now + d.ackDelay
			d.timers.arm(c, c.ackAt)
		case c.ackOwed > 0 && d.now >= c.ackAt:
			c.sendAck(0)
		}
	}
	// What is left for the next service: frames the link did not take,
	// an acknowledgement that did not go.
	k := 0
	for _, c := range d.work {
		if c.dead == nil && (c.sndSent != c.sndNxt || c.open || c.ackNow) {
			d.work[k] = c
			k++
		} else {
			c.inWork = false
		}
	}
	clear(d.work[k:])
	d.work = d.work[:k]
	if d.now >= d.cc.creditAt {
		d.shareCredit()
	}
	if d.clk.ref != nil {
		d.tickClock()
	}
	d.flushReleased()
	due := d.timers.top()
	asm.StoreRelaxed64(&d.due, due)
	asm.StoreRelaxed64(&d.rtoDue, due)
	asm.StoreRelaxed64(&d.flushDue, 0) // every open frame went
	d.closeTx()                        // its timers (armed) and refusals (coalesced) set what the stores above cleared
}

// coalesced notes that c left a frame open for the packets behind its
// last: the next poll sends it, or the keeper by engine_net_coalesce_max
// if the rank stops polling.
func (d *netDev) coalesced(c *netConn) {
	d.touch(c)
	if asm.LoadAcquire64(&d.flushDue) == 0 {
		asm.StoreRelaxed64(&d.flushDue, d.clock()+d.coalesceMax)
	}
}

// earliest returns the earlier of two timers, 0 meaning none.
func earliest(a, b uint64) uint64 {
	if a == 0 || b != 0 && b < a {
		return b
	}
	return a
}

// armed tells the device's timers that c's retransmission timer now
// runs out at t, so that the service, NextDue and the keeper know it
// before the next service.
func (d *netDev) armed(c *netConn, t uint64) {
	d.timers.arm(c, t)
	if cur := asm.LoadAcquire64(&d.rtoDue); cur == 0 || t < cur {
		asm.StoreRelaxed64(&d.rtoDue, t)
	}
	if cur := asm.LoadAcquire64(&d.due); cur == 0 || t < cur {
		asm.StoreRelaxed64(&d.due, t)
	}
}

// keep is the device's keeper: for an endpoint whose goroutines have
// stopped polling (a send that completed at once, then a long
// computation), it does what a poll would for the network: takes in what
// came, answers with acknowledgements and probes, retransmits, and sends
// frames left open. So a lost or held frame still goes, and a peer
// waiting on this rank neither stalls nor takes it for dead. It wakes at
// the earliest retransmission or open frame due, at most
// engine_net_coalesce_max apart while one runs, engine_net_keeper_idle
// apart otherwise or while the endpoint polls; it works only if the
// endpoint has not polled since its last look, and only if the endpoint
// is free. A rank that polls does all this itself, and the keeper keeps
// off it: taking the endpoint from a polling rank, even now and then,
// cost that rank's ping-pong two microseconds a message. A serial endpoint takes no lock, so
// the keeper leaves it alone: it retransmits only while it polls.
func (d *netDev) keep(ep *Endpoint) {
	defer close(d.kept)
	var seen uint64 // the endpoint's polls at the keeper's last look
	for !d.stop.Load() {
		now := d.clock()
		due := earliest(asm.LoadAcquire64(&d.rtoDue), asm.LoadAcquire64(&d.flushDue))
		polls := asm.LoadAcquire64(d.polls)
		idle := polls == seen
		seen = polls
		if idle && ep.lk.tryLock() {
			if !ep.serial && !ep.closed {
				n := d.pump()
				d.service()
				d.kicks.Inc()
				if n > 0 && (ep.inflight > 0 || ep.outq > 0) && !ep.notify {
					// Frames came for a rank that waits on operations,
					// or has packets queued for room, and has not polled
					// since the last look: its packets, the room opened
					// and its bulk lane are a poll's to handle, so the
					// doorbell wakes the goroutine parked on them. The
					// keeper acknowledging for it is not enough: the
					// peer then sees its frames taken while nothing
					// handles them.
					ep.notify = true
					ep.wake()
				}
			}
			ep.lk.unlock()
		}
		if due = earliest(asm.LoadAcquire64(&d.rtoDue), asm.LoadAcquire64(&d.flushDue)); due == 0 || !idle {
			// Nothing due, or the endpoint polls (and runs its timers)
			// itself: look again after the idle interval, off the CPUs
			// the ranks spin on.
			time.Sleep(d.keepIdle)
		} else if now = d.clock(); due > now {
			// No longer than engine_net_coalesce_max: a frame left open
			// meanwhile may be due before what it sleeps for.
			time.Sleep(min(time.Duration(progress.CountsToSeconds(due-now)*1e9), d.keepSlice))
		} else {
			time.Sleep(d.keepSlice)
		}
	}
}

// frame hands one received frame to its connection, or drops it.
func (d *netDev) frame(r *nic.RxDesc) {
	h, err := nic.ParseHeader(r.Data)
	if err != nil {
		d.malformed.Inc()
		d.release(r.Frame)
		return
	}
	if h.Dst != d.self || int(h.Src) >= len(d.conns) || d.conns[h.Src] == nil {
		d.foreign.Inc()
		d.release(r.Frame)
		return
	}
	c := d.conns[h.Src]
	if h.Epoch != c.epoch {
		d.stale.Inc()
		d.release(r.Frame)
		return
	}
	if c.dead != nil || c.tx == nil && !c.begin() {
		d.release(r.Frame)
		return
	}
	data := r.Data[nic.HeaderLen:]
	if c.opener != nil {
		b, err := c.opener.open(r.Data)
		if err != nil {
			if err == errAuthReplay {
				d.replays.Inc()
			} else {
				d.authFail.Inc()
			}
			d.release(r.Frame)
			return
		}
		data = b[nic.HeaderLen:]
	}
	c.heard = d.now
	c.onAck(h.Ack, h.SACK, h.Credit)
	switch h.Type {
	case nic.TypeData:
		kept := c.onData(h.Seq, h.Flags, r.Frame, data)
		d.touch(c) // an acknowledgement owed, now or later
		if kept {
			return
		}
	case nic.TypeAck:
		if h.Flags&nic.FlagAckNow != 0 {
			c.ackNow = true // a probe
			d.touch(c)
		}
		if len(data) > 0 {
			c.onSack(h.Ack, data)
		}
	case nic.TypeBye:
		c.closed(d.now)
	case nic.TypeClock:
		d.onClock(c, h.Flags, data)
	}
	d.release(r.Frame)
}

// release queues frame f to go back to the link.
func (d *netDev) release(f nic.Frame) {
	d.rel = append(d.rel, f)
	if len(d.rel) == cap(d.rel) {
		d.flushReleased()
	}
}

// flushReleased gives the queued frames back to the link.
func (d *netDev) flushReleased() {
	if len(d.rel) > 0 {
		d.link.Release(d.rel)
		d.rel = d.rel[:0]
	}
}

// nextDue is the endpoint's NextDue while it has operations in flight:
// the earliest connection timer, and no later than engine_net_poll_max
// from now, since no doorbell announces a frame.
func (d *netDev) nextDue() (uint64, bool) {
	due := progress.Now() + d.pollMax
	if t := asm.LoadAcquire64(&d.due); t != 0 && t < due {
		due = t
	}
	return due, true
}

// close lingers until every live peer has acknowledged all that this
// endpoint sent, as a closed shared-memory ring still holds its packets
// for the reader (for at most engine_net_linger, and no later than
// lingerUntil if set); then tells the peers it is going, gives back every
// frame and closes the link. The endpoint's lock must be held.
func (d *netDev) close() error {
	d.stop.Store(true)
	d.closeTx()
	linger := d.linger
	if !d.lingerUntil.IsZero() {
		// CloseContext's deadline, when sooner.
		linger = min(linger, progress.SecondsToCounts(max(time.Until(d.lingerUntil), 0).Seconds()))
	}
	deadline := d.clock() + linger
	for {
		waiting := false
		for _, c := range d.live {
			if c.dead == nil && c.sndUna != c.sndNxt {
				waiting = true
			}
		}
		if !waiting || d.clock() >= deadline {
			break
		}
		d.pump()
		d.service() // retransmits, and fails a peer silent for engine_net_peer_timeout
		runtime.Gosched()
	}
	byes := int(netByeCopies.Get())
	for _, c := range d.list {
		for i := 0; i < byes && c.dead == nil; i++ {
			c.sendBye()
		}
		c.close()
		c.closeBulk()
	}
	if d.bulk != nil {
		d.bulk.close()
	}
	d.flushReleased()
	for _, c := range d.counters() {
		(*c.shard).Close()
	}
	d.mode.Close()
	if d.path != nil {
		d.path.Close()
	}
	d.cc.close()
	if c := d.clk.probes; c != nil {
		c.Close()
		d.clk.steers.Close()
	}
	return d.link.Close()
}
