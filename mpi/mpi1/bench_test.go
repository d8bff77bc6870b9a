package mpi1

import (
	"fmt"
	"testing"

	"github.com/tachyon-hpc/tachyon/mpi"
)

// BenchmarkPingPong is the pair that holds CSEND and CRECV to the
// facade's speed: the same ping-pong between two ranks of an mpi.Run,
// blocking, through the facade's Send and Recv and through a Proc's
// CSEND and CRECV. Compare the two in one run:
//
//	go test ./mpi/mpi1 -run '^$' -bench PingPong -count 5
func BenchmarkPingPong(b *testing.B) {
	for _, size := range []int{8, 4096} {
		b.Run(fmt.Sprintf("facade/%d", size), func(b *testing.B) { pingPong(b, size, false) })
		b.Run(fmt.Sprintf("mpi1/%d", size), func(b *testing.B) { pingPong(b, size, true) })
	}
}

// pingPong runs b.N round trips of size bytes, through mpi1 or not.
func pingPong(b *testing.B, size int, viaMPI1 bool) {
	b.ReportAllocs()
	b.SetBytes(int64(2 * size))
	err := mpi.Run(2, func(c *mpi.Comm) error {
		me := c.Rank()
		buf := make([]byte, size)
		var round func() error
		if viaMPI1 {
			p, err := New(c)
			if err != nil {
				return err
			}
			defer p.Free()
			round = func() error {
				if me == 0 {
					if p.CSEND(Blocking, buf, 1, 1, size) < 0 || p.CRECV(Blocking, buf, 1, 1, size) < 0 {
						return fmt.Errorf("ERROR %d", p.ERROR())
					}
					return nil
				}
				if p.CRECV(Blocking, buf, 0, 1, size) < 0 || p.CSEND(Blocking, buf, 0, 1, size) < 0 {
					return fmt.Errorf("ERROR %d", p.ERROR())
				}
				return nil
			}
		} else {
			d, err := c.Dup()
			if err != nil {
				return err
			}
			defer d.Free()
			round = func() error {
				if me == 0 {
					if err := d.Send(buf, 1, 1); err != nil {
						return err
					}
					_, err := d.Recv(buf, 1, 1)
					return err
				}
				if _, err := d.Recv(buf, 0, 1); err != nil {
					return err
				}
				return d.Send(buf, 0, 1)
			}
		}
		for range 100 { // warm up
			if err := round(); err != nil {
				return err
			}
		}
		if err := c.Barrier(); err != nil {
			return err
		}
		if me == 0 {
			b.ResetTimer()
		}
		for range b.N {
			if err := round(); err != nil {
				return err
			}
		}
		if me == 0 {
			b.StopTimer()
		}
		return c.Finalize()
	})
	if err != nil {
		b.Fatal(err)
	}
}
