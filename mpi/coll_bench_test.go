package mpi

import (
	"fmt"
	"testing"
)

// The collectives' benchmarks, in-process: n ranks of Run, each calling
// the collective b.N times; the time is rank 0's, per call. go run ./bench
// -coll measures them as processes beside MPICH and Open MPI.

func benchColl(b *testing.B, n int, fn func(c *Comm) error) {
	b.ReportAllocs()
	err := Run(n, func(c *Comm) error {
		// Each rank as a process at ThreadSerialized (tachyonrun's
		// default): the engine's direct paths.
		if err := serialize(c, true); err != nil {
			return err
		}
		for range 100 { // warm
			if err := fn(c); err != nil {
				return err
			}
		}
		if err := c.Barrier(); err != nil {
			return err
		}
		if c.Rank() == 0 {
			b.ResetTimer()
		}
		for range b.N {
			if err := fn(c); err != nil {
				return err
			}
		}
		if c.Rank() == 0 {
			b.StopTimer()
		}
		return c.Finalize()
	})
	if err != nil {
		b.Fatal(err)
	}
}

func BenchmarkAllreduce8(b *testing.B) {
	for _, n := range []int{2, 4} {
		b.Run(fmt.Sprint("n=", n), func(b *testing.B) {
			in, out := make([][]float64, n), make([][]float64, n)
			for r := range n {
				in[r], out[r] = make([]float64, 1), make([]float64, 1)
			}
			benchColl(b, n, func(c *Comm) error {
				r := c.Rank()
				return Allreduce(c, in[r], out[r], Sum)
			})
		})
	}
}

func BenchmarkBcast8(b *testing.B) {
	for _, n := range []int{2, 4} {
		b.Run(fmt.Sprint("n=", n), func(b *testing.B) {
			bufs := make([][]float64, n)
			for r := range n {
				bufs[r] = make([]float64, 1)
			}
			benchColl(b, n, func(c *Comm) error {
				return Bcast(c, bufs[c.Rank()], 0)
			})
		})
	}
}

// BenchmarkSendrecv8 is the point-to-point exchange an 8-byte allreduce
// of two ranks makes, for comparison.
func BenchmarkSendrecv8(b *testing.B) {
	in, out := [][]byte{make([]byte, 8), make([]byte, 8)}, [][]byte{make([]byte, 8), make([]byte, 8)}
	benchColl(b, 2, func(c *Comm) error {
		r := c.Rank()
		_, err := c.Sendrecv(in[r], 1-r, 0, out[r], 1-r, 0)
		return err
	})
}

func BenchmarkAllreduce1M(b *testing.B) {
	for _, n := range []int{2, 4} {
		b.Run(fmt.Sprint("n=", n), func(b *testing.B) {
			in, out := make([][]float64, n), make([][]float64, n)
			for r := range n {
				in[r], out[r] = make([]float64, 1<<17), make([]float64, 1<<17)
			}
			b.SetBytes(1 << 20)
			benchColl(b, n, func(c *Comm) error {
				r := c.Rank()
				return Allreduce(c, in[r], out[r], Sum)
			})
		})
	}
}

// BenchmarkReduceKernel is Sum on []float64: the unrolled kernel against
// a plain loop.
func BenchmarkReduceKernel(b *testing.B) {
	in, inout := make([]float64, 4096), make([]float64, 4096)
	b.Run("kernel", func(b *testing.B) {
		b.SetBytes(8 * 4096)
		for range b.N {
			sumInto(in, inout)
		}
	})
	b.Run("loop", func(b *testing.B) {
		b.SetBytes(8 * 4096)
		for range b.N {
			for i := range inout {
				inout[i] += in[i]
			}
		}
	})
}

// BenchmarkIallreduce8 is an 8-byte Iallreduce and its Wait.
func BenchmarkIallreduce8(b *testing.B) {
	in, out := [][]float64{{1}, {2}}, [][]float64{{0}, {0}}
	benchColl(b, 2, func(c *Comm) error {
		r := c.Rank()
		req, err := Iallreduce(c, in[r], out[r], Sum)
		if err != nil {
			return err
		}
		_, err = req.Wait()
		return err
	})
}
