package mpi

import (
	"fmt"
	"testing"

	"github.com/tachyon-hpc/tachyon/internal/testcvar"
)

// BenchmarkCollPath times the collectives of two goroutine ranks through
// the shared-memory collective area (shm) and by messages (msgs), in the
// same invocation, so that their ratio holds on a busy machine.
func BenchmarkCollPath(b *testing.B) {
	ops := []struct {
		name  string
		bytes int
		fn    func(c *Comm, in, out []float64) error
	}{
		{"Barrier", 0, func(c *Comm, _, _ []float64) error { return c.Barrier() }},
		{"Bcast", 8, func(c *Comm, in, _ []float64) error { return Bcast(c, in, 0) }},
		{"Reduce", 8, func(c *Comm, in, out []float64) error { return Reduce(c, in, out, Sum, 0) }},
		{"Allreduce", 8, func(c *Comm, in, out []float64) error { return Allreduce(c, in, out, Sum) }},
		{"Bcast", 64 << 10, func(c *Comm, in, _ []float64) error { return Bcast(c, in, 0) }},
		{"Allreduce", 64 << 10, func(c *Comm, in, out []float64) error { return Allreduce(c, in, out, Sum) }},
		{"Bcast", 1 << 20, func(c *Comm, in, _ []float64) error { return Bcast(c, in, 0) }},
		{"Allreduce", 1 << 20, func(c *Comm, in, out []float64) error { return Allreduce(c, in, out, Sum) }},
	}
	for _, op := range ops {
		for _, path := range []string{"shm", "msgs"} {
			b.Run(fmt.Sprintf("%s%d/%s", op.name, op.bytes, path), func(b *testing.B) {
				testcvar.Set(b, "mpi_coll_shm", fmt.Sprint(path == "shm"))
				testcvar.Set(b, "mpi_coll_shm_max", "1099511627776")
				const n = 2
				in, out := make([][]float64, n), make([][]float64, n)
				for r := range n {
					in[r], out[r] = make([]float64, op.bytes/8), make([]float64, op.bytes/8)
				}
				if op.bytes > 0 {
					b.SetBytes(int64(op.bytes))
				}
				benchColl(b, n, func(c *Comm) error { return op.fn(c, in[c.Rank()], out[c.Rank()]) })
			})
		}
	}
}
