package main

import (
	"fmt"
	"io"

	"github.com/tachyon-hpc/tachyon/mpi"
)

// The measurements follow ../shared/anchors/mpi_pingpong.c exactly, so
// that Tachyon's figures and MPICH's and Open MPI's compare line by line:
// the same sizes, iteration counts, warm-up, window and acknowledgement.

// window is the number of nonblocking sends in flight in the message-rate
// and bandwidth test.
const window = 64

// Result is one measured figure: kind is "latency" (one-way µs), "msgrate"
// (million messages per second) or "bw" (MB/s).
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

// suite runs every test on the two ranks of c and returns rank 0's
// results (rank 1 returns nil). progress, if not nil, gets a line per test
// as it starts.
func suite(c *mpi.Comm, max int, progress io.Writer) ([]Result, error) {
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
	// default -max) parked, and the ping-pong of the first 20 ms or so
	// after such a sleep runs slow: in whole runs 0 B latency came out
	// 0.46-0.50 µs against 0.38-0.41 for 1 B, and a second pass measured
	// 0.40. The anchor's ranks never sleep, and show nothing of the kind.
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
		rate, err := messageRate(c, buf, size)
		if err != nil {
			return nil, err
		}
		out = append(out, Result{"msgrate", size, rate}, Result{"bw", size, rate * float64(size)})
	}
	if rank != 0 {
		return nil, nil
	}
	return out, nil
}

// latency returns half the round trip of a blocking ping-pong, in µs.
func latency(c *mpi.Comm, buf []byte) (float64, error) {
	iters := itersFor(len(buf))
	warm := iters / 10
	var t0 float64
	for i := 0; i < iters+warm; i++ {
		if i == warm {
			if err := c.Barrier(); err != nil {
				return 0, err
			}
			t0 = mpi.Wtime()
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
// window of nonblocking sends, each window acknowledged.
func messageRate(c *mpi.Comm, buf []byte, size int) (float64, error) {
	iters := itersFor(size)/window + 10
	const warm = 5
	reqs := make([]*mpi.Request, window)
	var t0 float64
	for i := 0; i < iters+warm; i++ {
		if i == warm {
			if err := c.Barrier(); err != nil {
				return 0, err
			}
			t0 = mpi.Wtime()
		}
		var err error
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
			for w := range reqs {
				if reqs[w], err = c.Irecv(buf[w*size:(w+1)*size], 0, 2); err != nil {
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
