package engine

import (
	"time"

	"github.com/tachyon-hpc/tachyon/cvar"
	"github.com/tachyon-hpc/tachyon/pvar"
)

// How much a rank sends to a network peer before it hears back: the
// least of three bounds, checked when Reserve numbers a new frame.
//
//  1. The window (engine_net_window): the frames the two sides keep
//     numbered, sent and not acknowledged on one side, held out of order
//     on the other.
//  2. The peer's credit: the receiver takes seq below ack+credit, the
//     frames it has room for beyond what it delivered. Its room is what
//     its link can take in between two polls (nic.Status.RxCapacity: the
//     fill rings of an AF_XDP link, the socket buffer of a UDP one, or
//     engine_net_credit_frames), shared equally among the network peers
//     that sent it data in the last engine_net_credit_active (one at
//     least), no less than engine_net_credit_min each, so that N senders
//     into one receiver together fit its ring rather than overrun it,
//     while one sender alone has all of it. A peer that starts sending
//     has the share of those active before it for a round trip: the
//     congestion window's start (below) bounds that burst.
//  3. The congestion window (cwnd), AIMD as TCP Reno's: it opens from
//     engine_net_cwnd_initial by the frames acknowledged while below the
//     slow-start threshold, then by one frame a window acknowledged; a
//     loss halves it, once a round trip: a hole the selective
//     acknowledgement shows (fast retransmit) sets it and the threshold
//     to half the frames in flight, a retransmission timeout sets the
//     threshold so and the window to engine_net_cwnd_min; it never goes
//     below engine_net_cwnd_min nor above engine_net_cwnd_max. It grows
//     only while the sender uses it (half of it in flight): a ping-pong,
//     or a burst of small messages that share a few frames, leaves it
//     where it is.
//
// A sender that finds no room waits (Reserve returns nil, the packets
// queue in the endpoint) and is counted once per wait: engine_net_cwnd_stalls
// for the window, engine_net_credit_stalls for the credit.
//
// Pacing: a window opens on acknowledgements, and a sender with a whole
// window's frames to send would send them in one burst, which a shared
// switch port or receive ring (incast) takes worse than the same frames
// spread out. Once a loss has cut the connection's window (the threshold
// is below engine_net_cwnd_max: there is congestion on its path), while
// the window is above engine_net_pace_burst frames, a frame's first send
// waits for its slot: the frames go at twice the window's rate, a window
// each half smoothed round trip (one every srtt/2cwnd: the window, not
// pacing, bounds the rate, as Linux paces TCP at twice it in slow start;
// at once the window's own rate, pacing slowed a sender whose round trip
// a loaded receiver stretched), in bursts of at most
// engine_net_pace_burst (a generic cell rate algorithm: a frame may go
// once the theoretical time of the next is within burst-1 intervals of
// now). A frame held back stays sealed and numbered, as one the link had
// no room for; the poll that finds its slot come sends it (the slot is
// a device timer, for a rank that parks or stops polling). A ping-pong,
// or a message-rate window on a clean path, is never paced.

// Control variables of congestion control and credit, read when an
// endpoint opens its device.
var (
	netCwndInit = cvar.NewInt("engine_net_cwnd_initial", 64,
		"Congestion window a rank starts with toward each network peer: the frames it may have in flight before the peer's first acknowledgements open the window further (slow start).",
		cvar.WithCategory("engine"), cvar.WithRange(1, 1<<15), cvar.WithUnit("frames"))
	netCwndMin = cvar.NewInt("engine_net_cwnd_min", 64,
		"Smallest congestion window toward a network peer: where halving on loss stops, and the window a retransmission timeout leaves. Also bounds the frames one timeout sends again (with engine_net_rto_burst). A floor high enough that random loss, which is no congestion, does not throttle a stream to a few frames a round trip.",
		cvar.WithCategory("engine"), cvar.WithRange(1, 1<<15), cvar.WithUnit("frames"))
	netCwndMax = cvar.NewInt("engine_net_cwnd_max", 1<<15,
		"Largest congestion window toward a network peer, at most engine_net_window (which bounds it anyway).",
		cvar.WithCategory("engine"), cvar.WithRange(1, 1<<15), cvar.WithUnit("frames"))
	netCreditFrames = cvar.NewInt("engine_net_credit_frames", 0,
		"Frames a rank lets all its network peers together have sent to it beyond what it has delivered, shared equally as their credit among those that sent it data lately (engine_net_credit_active), at most engine_net_window each, at least engine_net_credit_min: 0 takes what its link can take in between two polls (an AF_XDP link's fill rings, a UDP link's socket buffer).",
		cvar.WithCategory("engine"), cvar.WithRange(0, 1<<30), cvar.WithUnit("frames"))
	netCreditActive = cvar.NewDuration("engine_net_credit_active", 10*time.Millisecond,
		"How recently a network peer must have sent this rank data to count among those that share its credit (engine_net_credit_frames); the shares are worked out again every quarter of it.",
		cvar.WithCategory("engine"), cvar.WithRange(int64(time.Microsecond), int64(time.Minute)))
	netPaceBurst = cvar.NewInt("engine_net_pace_burst", 128,
		"Frames a rank sends to a network peer back to back before pacing spreads the rest of its window over the smoothed round trip; pacing applies only once a loss has cut the congestion window toward the peer and while the window is larger than this. 0 turns pacing off.",
		cvar.WithCategory("engine"), cvar.WithRange(0, 1<<15), cvar.WithUnit("frames"))
	netCreditMin = cvar.NewInt("engine_net_credit_min", 16,
		"Least credit a rank gives each network peer, whatever its share of engine_net_credit_frames: with more peers than that divided by this, their credits together may exceed what the link can take in.",
		cvar.WithCategory("engine"), cvar.WithRange(1, 1<<15), cvar.WithUnit("frames"))
)

// Performance variables of congestion control and credit.
var (
	pvNetCwnd = pvar.NewLevel("engine_net_cwnd",
		"Congestion windows of this rank toward its network peers, summed: engine_net_cwnd_initial each from the connection's first frame either way (a peer never talked to has none).",
		pvar.WithUnit("frames"), pvar.WithBind(pvar.BindComm))
	pvNetCwndHWM = pvar.NewHighWatermark("engine_net_cwnd_hwm",
		"Largest congestion window toward one network peer that this rank has reached.",
		pvar.WithUnit("frames"), pvar.WithBind(pvar.BindComm))
	pvNetCwndCuts = pvar.NewCounter("engine_net_cwnd_reductions",
		"Times a congestion window toward a network peer was cut for a loss: halved for a hole a selective acknowledgement showed (once a round trip), or to engine_net_cwnd_min at a retransmission timeout.",
		pvar.WithUnit("reductions"), pvar.WithBind(pvar.BindComm))
	pvNetCwndStalls = pvar.NewCounter("engine_net_cwnd_stalls",
		"Times a send to a network peer found the congestion window full and waited for an acknowledgement.",
		pvar.WithUnit("stalls"), pvar.WithBind(pvar.BindComm))
	pvNetPaceWaits = pvar.NewCounter("engine_net_pace_waits",
		"Times pacing held back frames to a network peer that the window allowed, to spread a burst over the round trip (engine_net_pace_burst).",
		pvar.WithUnit("waits"), pvar.WithBind(pvar.BindComm))
	pvNetPaced = pvar.NewCounter("engine_net_paced_frames",
		"Frames to network peers that went at their pacing slot rather than at once (sent while pacing held the connection's frames back).",
		pvar.WithUnit("frames"), pvar.WithBind(pvar.BindComm))
	pvNetCreditStalls = pvar.NewCounter("engine_net_credit_stalls",
		"Times a send to a network peer found the peer's credit used up and waited for it to deliver frames and give more.",
		pvar.WithUnit("stalls"), pvar.WithBind(pvar.BindComm))
)

// What Reserve last waited for (netConn.stall).
const (
	stallNone   = 0
	stallCwnd   = 1
	stallCredit = 2
)

// ccConfig is the device's reading of the variables above.
type ccConfig struct {
	cwndInit, cwndMin, cwndMax uint32
	creditBudget, creditMin    uint32 // creditBudget 0: no bound but the window
	creditActive, creditAt     uint64 // engine_net_credit_active in clock counts; when the shares are next worked out
	cwndLevel                  *pvar.LevelShard
	cwndHWM                    *pvar.WatermarkShard
	cwndCuts, cwndStalls       *pvar.CounterShard
	creditStalls               *pvar.CounterShard
	paceBurst                  uint32 // 0: no pacing
	paceWaits, paced           *pvar.CounterShard
}

// newCCConfig reads the variables for a device of window w over a link
// that can take rxCap frames in (0: unknown).
func newCCConfig(w uint32, rxCap int, counts func(time.Duration) uint64) ccConfig {
	cc := ccConfig{
		cwndMax:   min(uint32(netCwndMax.Get()), w),
		creditMin: min(uint32(netCreditMin.Get()), w),
	}
	cc.cwndMin = min(uint32(netCwndMin.Get()), cc.cwndMax)
	cc.cwndInit = min(max(uint32(netCwndInit.Get()), cc.cwndMin), cc.cwndMax)
	cc.creditActive = counts(netCreditActive.Get())
	cc.creditBudget = uint32(netCreditFrames.Get())
	if cc.creditBudget == 0 {
		cc.creditBudget = uint32(max(rxCap, 0))
	}
	cc.cwndLevel, cc.cwndHWM = pvNetCwnd.Shard(), pvNetCwndHWM.Shard()
	cc.cwndCuts, cc.cwndStalls, cc.creditStalls = pvNetCwndCuts.Shard(), pvNetCwndStalls.Shard(), pvNetCreditStalls.Shard()
	cc.paceBurst = uint32(netPaceBurst.Get())
	cc.paceWaits, cc.paced = pvNetPaceWaits.Shard(), pvNetPaced.Shard()
	return cc
}

// own makes the level and watermark o's (netDev.own does the counters).
func (cc *ccConfig) own(o *pvar.Owner) {
	l := pvNetCwnd.ShardOf(o)
	l.Set(cc.cwndLevel.Load())
	cc.cwndLevel.Close()
	cc.cwndLevel = l
	h := pvNetCwndHWM.ShardOf(o)
	cc.cwndHWM.Close()
	cc.cwndHWM = h
}

// close closes the level and watermark shards; the level drops the
// windows it held, as the connections are gone.
func (cc *ccConfig) close() {
	cc.cwndLevel.Set(0)
	cc.cwndLevel.Close()
	cc.cwndHWM.Close()
}

// startCC gives a new connection its initial congestion window.
func (c *netConn) startCC() {
	cc := &c.dev.cc
	c.cwnd, c.ssthresh = cc.cwndInit, cc.cwndMax
	cc.cwndLevel.Add(int64(c.cwnd))
	cc.cwndHWM.Observe(int64(c.cwnd))
}

// shareCredit gives every connection begun an equal share of the
// device's credit budget among the peers that sent data within
// engine_net_credit_active (one at least), and sets when to work it out
// again. The device's service calls it every quarter of that; a
// connection begun meanwhile takes the last share (netConn.begin).
func (d *netDev) shareCredit() {
	cc := &d.cc
	cc.creditAt = d.now + cc.creditActive/4
	cr := d.window
	if cc.creditBudget > 0 {
		n := uint32(0)
		for _, c := range d.live {
			if c.dataAt != 0 && d.now-c.dataAt < cc.creditActive {
				n++
			}
		}
		cr = min(max(cc.creditBudget/max(n, 1), cc.creditMin), d.window)
	}
	d.share = cr
	for _, c := range d.live {
		c.credit = cr
	}
}

// wait notes that Reserve found no room for why (stallCwnd, stallCredit),
// counted once per wait.
func (c *netConn) wait(why uint8) {
	c.starved = true
	if c.stall == why {
		return
	}
	c.stall = why
	if why == stallCwnd {
		c.dev.cc.cwndStalls.Inc()
	} else {
		c.dev.cc.creditStalls.Inc()
	}
}

// grow opens the congestion window for acked frames acknowledged by
// ack, of flight in flight before it came: by acked below the slow-start
// threshold, by one a window above it. Not while a recovery lasts (ack
// short of recover), nor while the sender left the window half unused
// (onAck calls it only while recovering or with half the window used).
func (c *netConn) grow(ack, acked, flight uint32) {
	if c.recovering {
		if seqLT(ack, c.recover) {
			return
		}
		c.recovering = false
	}
	cc := &c.dev.cc
	if 2*flight < c.cwnd || c.cwnd >= cc.cwndMax {
		return
	}
	old := c.cwnd
	if c.cwnd < c.ssthresh {
		c.cwnd = min(c.cwnd+acked, c.ssthresh)
	} else if c.cwndAcc += acked; c.cwndAcc >= c.cwnd {
		c.cwndAcc -= c.cwnd
		c.cwnd++
	}
	c.cwnd = min(c.cwnd, cc.cwndMax)
	cc.cwndLevel.Add(int64(c.cwnd) - int64(old))
	cc.cwndHWM.Observe(int64(c.cwnd))
}

// reduce cuts the congestion window for a loss, once a round trip: the
// threshold to half the frames in flight, the window to it (a hole the
// selective acknowledgement showed) or to engine_net_cwnd_min (timeout).
// The recovery lasts until what is in flight now is acknowledged.
func (c *netConn) reduce(timeout bool) {
	if c.recovering && !timeout {
		return
	}
	cc := &c.dev.cc
	old := c.cwnd
	c.ssthresh = max(min(c.sndNxt-c.sndUna, c.cwnd)/2, cc.cwndMin)
	c.cwnd = c.ssthresh
	if timeout {
		c.cwnd = cc.cwndMin
	}
	c.cwndAcc = 0
	c.recover, c.recovering = c.sndNxt, true
	cc.cwndCuts.Inc()
	cc.cwndLevel.Add(int64(c.cwnd) - int64(old))
}

// pace reports whether frame sndSent may go now (its first send), and
// takes its slot if so; if not, the connection waits for paceAt, armed
// as a device timer.
func (c *netConn) pace() bool {
	cc := &c.dev.cc
	if cc.paceBurst == 0 || c.cwnd <= cc.paceBurst || c.ssthresh >= cc.cwndMax || c.srtt == 0 {
		return true // no pacing: off, a small window, no loss yet, or no round trip measured
	}
	d := c.dev
	iv := max(c.srtt/uint64(2*c.cwnd), 1) // twice the window's rate: pacing bounds bursts, the window the rate
	tat := max(c.paceTAT, d.now)
	if slack := uint64(cc.paceBurst-1) * iv; tat > d.now+slack {
		c.paceAt = tat - slack
		if !c.paceHeld {
			c.paceHeld = true
			cc.paceWaits.Inc()
		}
		d.armed(c, c.paceAt) // the service that pops it flushes c, which holds frames: on the work list
		return false
	}
	c.paceTAT = tat + iv
	if c.paceHeld {
		cc.paced.Inc()
	}
	return true
}
