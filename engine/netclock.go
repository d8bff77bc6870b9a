package engine

import (
	"encoding/binary"
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"github.com/tachyon-hpc/tachyon/cvar"
	"github.com/tachyon-hpc/tachyon/nic"
	"github.com/tachyon-hpc/tachyon/progress"
	"github.com/tachyon-hpc/tachyon/pvar"
)

// Steering this process's clock toward a reference rank's over the
// network, so that the ranks of a job across hosts read one Wtime.
//
// In rounds, engine_net_clock_interval apart (sooner at first: 10 ms,
// then doubling), the steering rank probes the reference with clock
// frames (nic.TypeClock), one at a time, clockProbes to a round. The
// reference answers each at once with its Wtime. Of a round, the answer
// that came back quickest gives a sample: the reference's Wtime at the
// midpoint of the round trip, give or take half of it (Cristian). A line
// through the last clockKeep samples, by least squares over raw counter
// values once they span clockSpan, gives the reference's offset and rate;
// progress.SteerClock slews Wtime onto it (steps only forward). So the
// offset and the drift between two hosts' counters are both followed.
//
// The bound: a steering rank's error is the gap it just closed plus half
// the round trip of the newest sample and how far the line passes from
// it; each probe tells the reference that error, and the
// reference answers with the largest it has heard lately (from any rank),
// so any two ranks' Wtimes disagree by at most the steering rank's error
// plus that. The reference's own bound is the sum of the two largest.
//
// A clock frame body (clockBody bytes): 0 the probe's raw count (echoed),
// 8 the reference's Wtime (float64; answers only), 16 an error bound
// (float64: in a probe, the prober's; in an answer, the largest heard).

var netClockInterval = cvar.NewDuration("engine_net_clock_interval", time.Second,
	"Time between the rounds of clock probes by which a rank steers its Wtime toward rank 0's across hosts (MPI_WTIME_IS_GLOBAL); the first rounds come sooner. Shorter follows drift more closely, at a few frames a round.",
	cvar.WithCategory("engine"), cvar.WithRange(int64(time.Millisecond), int64(time.Hour)))

var (
	pvNetClockProbes = pvar.NewCounter("engine_net_clock_probes", "Clock probes sent to steer this rank's Wtime toward the reference rank's.", pvar.WithUnit("frames"), pvar.WithBind(pvar.BindComm))
	pvNetClockSteers = pvar.NewCounter("engine_net_clock_steers", "Corrections of this rank's Wtime from rounds of clock probes.", pvar.WithUnit("corrections"), pvar.WithBind(pvar.BindComm))
)

const (
	clockCount  = 0  // u64: the probe's raw count, echoed
	clockWtime  = 8  // float64: the reference's Wtime (answers only)
	clockErr    = 16 // float64: an error bound
	clockBody   = clockErr + 8
	clockProbes = 4     // answers a round takes its sample from
	clockKeep   = 16    // samples the line is fit through
	clockSpan   = 0.5   // seconds samples must span for the rate to be fit
	clockFirst  = 10e-3 // seconds to the second round
	clockLost   = 20e-3 // seconds after which a probe counts as lost
	clockSlack  = 10e-6 // seconds over twice the best round trip a sample may take
	clockHeard  = 4     // intervals an error heard by the reference counts
	clockSkip   = 3     // slow rounds in a row dropped before one is taken anyway
)

// clockSample is the reference's Wtime at raw count x, give or take rtt/2.
type clockSample struct {
	x, rtt uint64
	ref    float64
}

// netClock is a device's clock steering: the prober's rounds, or the
// reference's record of errors heard. The endpoint's lock guards it, but
// bound, which Endpoint.ClockBound reads.
type netClock struct {
	ref      *netConn // the reference's connection (nil: this rank does not steer)
	due      uint64   // when the next probe goes
	sentAt   uint64   // raw count when the probe in flight went (0: none)
	answered int      // probes of this round answered or lost
	best     clockSample
	samples  [clockKeep]clockSample
	kept     int // samples held (the newest at kept-1 once full, oldest first)
	skipped  int // slow rounds dropped in a row
	err      float64
	next     uint64 // counts to the round after this one, up to interval
	interval uint64
	lost     uint64
	bound    atomic.Uint64 // float64 bits of the current bound on any two ranks' skew (0: none yet)
	probes   *pvar.CounterShard
	steers   *pvar.CounterShard
}

// SteerClock makes this endpoint steer its process's clock (progress's
// Wtime) toward rank ref's, over the network, from now until it closes.
// The process's other endpoints must not steer too. It is an error if ref
// is not a network peer.
func (ep *Endpoint) SteerClock(ref int) error {
	ep.lock()
	defer ep.unlock()
	if !ep.OverNetwork(ref) {
		return fmt.Errorf("%w: rank %d is not a network peer of rank %d", ErrConfig, ref, ep.rank)
	}
	d := ep.net
	k := &d.clk
	k.ref = d.conns[ref]
	k.interval = progress.SecondsToCounts(netClockInterval.Get().Seconds())
	k.next = min(progress.SecondsToCounts(clockFirst), k.interval)
	k.lost = progress.SecondsToCounts(clockLost)
	k.probes, k.steers = pvNetClockProbes.ShardOf(ep.owner), pvNetClockSteers.ShardOf(ep.owner)
	k.due = d.clock()
	return nil
}

// OverNetwork reports whether this endpoint reaches rank r over the
// network transport: the peers SteerClock can take as a reference.
func (ep *Endpoint) OverNetwork(r int) bool {
	return ep.net != nil && r >= 0 && r < len(ep.net.conns) && ep.net.conns[r] != nil
}

// ClockBound returns the bound, in seconds, on how far this rank's Wtime
// and any other's disagree, as the clock frames last measured it; ok is
// false before any measurement (a rank that neither steers nor is a
// reference for one).
func (ep *Endpoint) ClockBound() (bound float64, ok bool) {
	if ep.net == nil {
		return 0, false
	}
	b := ep.net.clk.bound.Load()
	return math.Float64frombits(b), b != 0
}

// tickClock runs the prober's timers, from the device's service: a probe lost,
// the next probe due.
func (d *netDev) tickClock() {
	k := &d.clk
	if k.sentAt != 0 && d.now-k.sentAt > k.lost && d.now > k.sentAt {
		k.sentAt = 0
		if k.answered++; k.answered >= clockProbes {
			d.endRound()
		}
	}
	if k.sentAt == 0 && d.now >= k.due && k.ref.dead == nil {
		d.probeClock()
	}
}

// probeClock sends the reference a probe, stamped with the raw count.
func (d *netDev) probeClock() {
	k := &d.clk
	var b [clockBody]byte
	x := progress.Now()
	binary.LittleEndian.PutUint64(b[clockCount:], x)
	binary.LittleEndian.PutUint64(b[clockErr:], math.Float64bits(k.err))
	if k.ref.sendControl(nic.TypeClock, nic.FlagAckNow, b[:]) {
		k.sentAt = x
		k.probes.Inc()
	}
}

// onClock takes a clock frame from c: a probe to answer, or an answer to
// a probe of this rank's. A body too short is malformed.
func (d *netDev) onClock(c *netConn, flags nic.Flags, body []byte) {
	if len(body) < clockBody {
		d.malformed.Inc()
		return
	}
	if flags&nic.FlagAckNow != 0 {
		d.answerClock(c, body)
		return
	}
	k := &d.clk
	x1 := progress.Now()
	if c != k.ref || k.sentAt == 0 || binary.LittleEndian.Uint64(body[clockCount:]) != k.sentAt || x1 < k.sentAt {
		return // late, or not asked for
	}
	ref := math.Float64frombits(binary.LittleEndian.Uint64(body[clockWtime:]))
	heard := math.Float64frombits(binary.LittleEndian.Uint64(body[clockErr:]))
	rtt := x1 - k.sentAt
	if k.best.rtt == 0 || rtt < k.best.rtt {
		k.best = clockSample{x: k.sentAt + rtt/2, rtt: rtt, ref: ref}
	}
	k.sentAt = 0
	if k.answered++; k.answered < clockProbes {
		d.probeClock() // the next at once: the round is one burst
		return
	}
	d.endRound()
	if heard >= 0 && !math.IsInf(heard, 0) {
		k.bound.Store(math.Float64bits(max(k.err+heard, math.SmallestNonzeroFloat64)))
	}
}

// answerClock answers c's probe with this rank's Wtime and the largest
// error heard from any rank lately, noting c's.
func (d *netDev) answerClock(c *netConn, probe []byte) {
	claim := math.Float64frombits(binary.LittleEndian.Uint64(probe[clockErr:]))
	if !(claim >= 0) || math.IsInf(claim, 0) {
		claim = 0 // a prober with no estimate yet, or nonsense
	}
	c.clockErr, c.clockAt = claim, d.now
	var first, second float64
	for _, o := range d.live {
		if o.clockAt == 0 || d.now-o.clockAt > clockHeard*d.clockIntervalCounts() {
			continue
		}
		if o.clockErr > first {
			first, second = o.clockErr, first
		} else if o.clockErr > second {
			second = o.clockErr
		}
	}
	var b [clockBody]byte
	copy(b[clockCount:clockCount+8], probe[clockCount:clockCount+8])
	binary.LittleEndian.PutUint64(b[clockWtime:], math.Float64bits(progress.Wtime()))
	binary.LittleEndian.PutUint64(b[clockErr:], math.Float64bits(first))
	c.sendControl(nic.TypeClock, 0, b[:])
	if first > 0 {
		d.clk.bound.Store(math.Float64bits(first + second))
	}
}

// clockIntervalCounts is engine_net_clock_interval in counts, as the
// reference reads it (it does not steer, so holds no copy).
func (d *netDev) clockIntervalCounts() uint64 {
	if d.clk.interval != 0 {
		return d.clk.interval
	}
	return progress.SecondsToCounts(netClockInterval.Get().Seconds())
}

// endRound takes the round's sample, if it is quick enough to trust,
// steers the clock by the line through the samples, and schedules the
// next round.
func (d *netDev) endRound() {
	k := &d.clk
	best := k.best
	k.answered, k.best = 0, clockSample{}
	k.due = d.now + k.next
	k.next = min(2*k.next, k.interval)
	if best.rtt == 0 {
		return // every probe lost
	}
	if k.kept > 0 && k.skipped < clockSkip {
		quick := k.samples[0].rtt
		for _, s := range k.samples[:k.kept] {
			quick = min(quick, s.rtt)
		}
		if best.rtt > 2*quick+progress.SecondsToCounts(clockSlack) {
			k.skipped++
			return // a slow round: the reference was busy, or the path
		}
	}
	k.skipped = 0
	if k.kept == clockKeep {
		copy(k.samples[:], k.samples[1:])
		k.kept--
	}
	k.samples[k.kept] = best
	k.kept++
	at, ref, dev, spc, rtt := k.fit()
	unc := progress.CountsToSeconds(rtt)/2 + dev // the reference's Wtime at count at lies within ref ± unc
	gap := progress.SteerClock(at, ref, unc, spc, progress.CountsToSeconds(k.interval))
	if math.IsNaN(gap) {
		return
	}
	k.steers.Inc()
	k.err = math.Abs(gap) + unc
}

// fit returns the line through the samples whose round trips were quick
// (within twice the quickest kept, plus clockSlack: a slow one is off by
// up to half its round trip, and one such sample tilts the line): the
// reference's Wtime ref at raw count at (the newest such sample's, whose
// round trip was rtt), and its seconds a count, by least squares once
// those samples span clockSpan, else this clock's own rate through the
// newest. The rate stays within 2 × clock_slew_max of this clock's own.
// dev is how far the line passes from the newest sample, in seconds:
// the sample holds the reference's Wtime within half its round trip, so
// the line's value at count at holds it within that plus dev.
func (k *netClock) fit() (at uint64, ref, dev, spc float64, rtt uint64) {
	var quick uint64
	for _, p := range k.samples[:k.kept] {
		if quick == 0 || p.rtt < quick {
			quick = p.rtt
		}
	}
	limit := 2*quick + progress.SecondsToCounts(clockSlack)
	var use [clockKeep]clockSample
	s := use[:0]
	for _, p := range k.samples[:k.kept] {
		if p.rtt <= limit {
			s = append(s, p)
		}
	}
	last := s[len(s)-1]
	own := 1 / progress.Clock().Frequency
	if len(s) < 3 || progress.CountsToSeconds(last.x-s[0].x) < clockSpan {
		return last.x, last.ref, 0, own, last.rtt
	}
	var mx, my float64 // x: counts from the newest sample (≤ 0); y: seconds from its reference
	for _, p := range s {
		mx += -float64(last.x - p.x)
		my += p.ref - last.ref
	}
	mx /= float64(len(s))
	my /= float64(len(s))
	var sxx, sxy float64
	for _, p := range s {
		x, y := -float64(last.x-p.x)-mx, p.ref-last.ref-my
		sxx += x * x
		sxy += x * y
	}
	if sxx <= 0 {
		return last.x, last.ref, 0, own, last.rtt
	}
	b := sxy / sxx
	a := my - b*mx // at the newest sample's count
	lim := 2 * progress.SlewMax()
	return last.x, last.ref + a, math.Abs(a), max(own*(1-lim), min(own*(1+lim), b)), last.rtt
}
