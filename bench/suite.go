package main

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"

	"github.com/tachyon-hpc/tachyon/mpi"
	"github.com/tachyon-hpc/tachyon/pvar"
)

// The measurements are those of the comparison program,
// compare/pingpong.c, so that Tachyon's figures and MPICH's and Open MPI's
// compare line by line: the same sizes, iteration counts, warm-up, window
// and acknowledgement.

// window is the number of nonblocking sends in flight in the message-rate
// and bandwidth test.
const window = 64

// Result is one measured figure: kind is "latency" (one-way µs), "msgrate"
// (million messages per second), "bw" (MB/s) or, over the network, "kick"
// (the frames rank 0's link sent per kick during the message-rate test).
type Result struct {
	Kind  string
	Size  int
	Value float64
}

func itersFor(size int) int {
	switch {
	case size <= 8192:
		return 20000
	case size <= 262144:
		return 2000
	}
	return 200
}

// sizes returns 0, 1, 2, 4, ... up to max.
func sizes(from, max int) []int {
	var s []int
	for n := from; n <= max; {
		s = append(s, n)
		if n == 0 {
			n = 1
		} else {
			n *= 2
		}
	}
	return s
}

// phaseKinds are the kinds of the figures -phases adds for each size of
// the message-rate test, in ns a message: where each rank's time goes in
// a window. The sender posts its window (Isend), collects it
// (WaitallInto) and waits for the acknowledgement; the receiver posts its
// window (Irecv), collects it as the messages arrive, and sends the
// acknowledgement. Whichever rank has no time to spare sets the rate
// (docs/bench.md).
var phaseKinds = [...]string{"send_post", "send_collect", "send_ack", "recv_post", "recv_collect", "recv_ack"}

// isPhase reports whether kind is one of phaseKinds.
func isPhase(kind string) bool {
	for _, k := range phaseKinds {
		if k == kind {
			return true
		}
	}
	return false
}

// phaseTag is the tag of the message that carries rank 1's phases to
// rank 0 (the tests use 1 to 3).
const phaseTag = 4

// suite runs every test on the two ranks of c and returns rank 0's
// results (rank 1 returns nil). With phases, the message-rate test also
// times each rank's phases (phaseKinds). progress, if not nil, gets a
// line per test as it starts.
func suite(c *mpi.Comm, max int, phases bool, progress io.Writer) ([]Result, error) {
	if c.Size() != 2 {
		return nil, fmt.Errorf("the benchmark needs exactly 2 ranks, not %d", c.Size())
	}
	rank := c.Rank()
	buf := make([]byte, max*window+1)
	for i := range buf {
		buf[i] = 1
	}
	// One untimed pass of the first test before any is measured. A rank
	// that waited for the other to fill its buffer (a few ms at the
	// default -max) parked, and the ping-pong of the first moments
	// after such a sleep runs slow: in whole runs 0 B latency came out
	// slower than 1 B, and a second pass did not (docs/bench.md has the
	// figures). The anchor's ranks never sleep, and show nothing of it.
	if _, err := latency(c, buf[:0]); err != nil {
		return nil, err
	}
	var out []Result
	say := func(format string, args ...any) {
		if progress != nil && rank == 0 {
			fmt.Fprintf(progress, format, args...)
		}
	}
	for _, size := range sizes(0, max) {
		say("latency %d B\n", size)
		us, err := latency(c, buf[:size])
		if err != nil {
			return nil, err
		}
		out = append(out, Result{"latency", size, us})
	}
	for _, size := range sizes(1, max) {
		say("message rate %d B\n", size)
		var rate float64
		var ph [3]float64
		var err error
		kicks := kickMeter()
		if phases {
			rate, ph, err = ratePhases(c, buf, size)
		} else {
			rate, err = messageRate(c, buf, size)
		}
		if err != nil {
			return nil, err
		}
		out = append(out, Result{"msgrate", size, rate}, Result{"bw", size, rate * float64(size)})
		if f, ok := kicks(); ok {
			out = append(out, Result{"kick", size, f})
		}
		if phases {
			all, err := gatherPhases(c, ph)
			if err != nil {
				return nil, err
			}
			for i, k := range phaseKinds {
				out = append(out, Result{k, size, all[i]})
			}
		}
	}
	if rank != 0 {
		return nil, nil
	}
	return out, nil
}

// startAt returns t0, the time the timed iterations started at, unless i
// is the first of them (after warm warm-up ones): then it lines the ranks
// up and returns the time now.
func startAt(c *mpi.Comm, i, warm int, t0 float64) (float64, error) {
	if i != warm {
		return t0, nil
	}
	err := c.Barrier()
	return mpi.Wtime(), err
}

// latency returns half the round trip of a blocking ping-pong, in µs.
func latency(c *mpi.Comm, buf []byte) (float64, error) {
	iters := itersFor(len(buf))
	warm := iters / 10
	var t0 float64
	var err error
	for i := 0; i < iters+warm; i++ {
		if t0, err = startAt(c, i, warm, t0); err != nil {
			return 0, err
		}
		if c.Rank() == 0 {
			if err := c.Send(buf, 1, 1); err != nil {
				return 0, err
			}
			if _, err := c.Recv(buf, 1, 1); err != nil {
				return 0, err
			}
		} else {
			if _, err := c.Recv(buf, 0, 1); err != nil {
				return 0, err
			}
			if err := c.Send(buf, 0, 1); err != nil {
				return 0, err
			}
		}
	}
	return (mpi.Wtime() - t0) * 1e6 / (2 * float64(iters)), nil
}

// messageRate returns millions of size-byte messages per second with a
// window of nonblocking sends, each window acknowledged. Out of line, as
// the profile found it: put in line in suite, the calls the profile puts
// in line in it would be calls inside a call put in line, which it does
// not find (golang/go#69046).
//
//go:noinline
func messageRate(c *mpi.Comm, buf []byte, size int) (float64, error) {
	iters := itersFor(size)/window + 10
	const warm = 5
	reqs := make([]*mpi.Request, window)
	bufs := windowBufs(buf, size)
	var t0 float64
	var err error
	for i := 0; i < iters+warm; i++ {
		if t0, err = startAt(c, i, warm, t0); err != nil {
			return 0, err
		}
		if c.Rank() == 0 {
			for w := range reqs {
				if reqs[w], err = c.Isend(buf[:size], 1, 2); err != nil {
					return 0, err
				}
			}
			if err := mpi.WaitallInto(reqs, nil); err != nil {
				return 0, err
			}
			if _, err := c.Recv(nil, 1, 3); err != nil {
				return 0, err
			}
		} else {
			for w, b := range bufs {
				if reqs[w], err = c.Irecv(b, 0, 2); err != nil {
					return 0, err
				}
			}
			if err := mpi.WaitallInto(reqs, nil); err != nil {
				return 0, err
			}
			if err := c.Send(nil, 0, 3); err != nil {
				return 0, err
			}
		}
	}
	t := mpi.Wtime() - t0
	return float64(iters*window) / t / 1e6, nil
}

// windowBufs returns the receiving rank's buffer for each message of a
// window, size bytes of buf apiece, made once before the windows (as the
// anchor's buf + w*size costs its loop nothing).
func windowBufs(buf []byte, size int) *[window][]byte {
	var bufs [window][]byte
	for w := range bufs {
		bufs[w] = buf[w*size : (w+1)*size]
	}
	return &bufs
}

// ratePhases is messageRate with each rank's phases timed (-phases): it
// also returns this rank's time in each of its three phases of a window
// (phaseKinds), in ns a message, from three clock reads a window (the
// end of one phase is the start of the next). It is messageRate's loop
// again, not a flag inside it: the profile (bench/default.pgo) finds a
// hot call by its line in its function, and lines added among
// messageRate's would lose the inlining it has there. The profile has no
// samples of this loop, so what it puts in line in messageRate (its
// WaitallInto) may stay a call here.
func ratePhases(c *mpi.Comm, buf []byte, size int) (float64, [3]float64, error) {
	iters := itersFor(size)/window + 10
	const warm = 5
	reqs := make([]*mpi.Request, window)
	bufs := windowBufs(buf, size)
	var t0, last float64 // last: when the last phase ended (the next begins)
	var ph [3]float64    // seconds, summed over the measured windows
	var err error
	for i := 0; i < iters+warm; i++ {
		if t0, err = startAt(c, i, warm, t0); err != nil {
			return 0, ph, err
		}
		if i == warm {
			last = t0
		}
		var posted, collected float64
		if c.Rank() == 0 {
			for w := range reqs {
				if reqs[w], err = c.Isend(buf[:size], 1, 2); err != nil {
					return 0, ph, err
				}
			}
			posted = mpi.Wtime()
			if err := mpi.WaitallInto(reqs, nil); err != nil {
				return 0, ph, err
			}
			collected = mpi.Wtime()
			if _, err := c.Recv(nil, 1, 3); err != nil {
				return 0, ph, err
			}
		} else {
			for w, b := range bufs {
				if reqs[w], err = c.Irecv(b, 0, 2); err != nil {
					return 0, ph, err
				}
			}
			posted = mpi.Wtime()
			if err := mpi.WaitallInto(reqs, nil); err != nil {
				return 0, ph, err
			}
			collected = mpi.Wtime()
			if err := c.Send(nil, 0, 3); err != nil {
				return 0, ph, err
			}
		}
		end := mpi.Wtime()
		if i >= warm {
			ph[0] += posted - last
			ph[1] += collected - posted
			ph[2] += end - collected
		}
		last = end
	}
	t := last - t0
	msgs := float64(iters * window)
	for i := range ph {
		ph[i] *= 1e9 / msgs
	}
	return msgs / t / 1e6, ph, nil
}

// gatherPhases gives rank 0 both ranks' phases of a message-rate test,
// the sender's (rank 0's) first; rank 1 gets nothing back.
func gatherPhases(c *mpi.Comm, ph [3]float64) ([6]float64, error) {
	var all [6]float64
	var b [24]byte
	if c.Rank() != 0 {
		for i, v := range ph {
			binary.LittleEndian.PutUint64(b[8*i:], math.Float64bits(v))
		}
		return all, c.Send(b[:], 0, phaseTag)
	}
	if _, err := c.Recv(b[:], 1, phaseTag); err != nil {
		return all, err
	}
	copy(all[:3], ph[:])
	for i := range 3 {
		all[3+i] = math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:]))
	}
	return all, nil
}

// kickMeter returns what reports the frames this process's network
// links sent per kick (nic_tx_frames over nic_tx_kicks: a system call
// that woke an AF_XDP socket's transmit side, or sent a UDP batch) from
// now on, and false if they sent none (no network link).
func kickMeter() func() (float64, bool) {
	f, _ := pvar.Lookup("nic_tx_frames")
	k, _ := pvar.Lookup("nic_tx_kicks")
	f0, k0 := f.Read(), k.Read()
	return func() (float64, bool) {
		kicks := k.Read() - k0
		if kicks <= 0 {
			return 0, false
		}
		return float64(f.Read()-f0) / float64(kicks), true
	}
}
