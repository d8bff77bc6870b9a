package engine

import (
	"testing"
	"time"

	"github.com/tachyon-hpc/tachyon/internal/testcvar"
)

// benchNetWorld makes a two-rank world over the network transport (UDP
// links on loopback), closed when b ends.
func benchNetWorld(b *testing.B) *World {
	b.Helper()
	testcvar.Set(b, "engine_net_force", "true")
	w, err := NewWorld(2)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		for i := range w.Size() {
			w.Endpoint(i).Close()
		}
	})
	return w
}

// BenchmarkNetPingPong: two goroutine ranks, each pinned to a CPU, bounce
// an 8-byte message over the network transport (UDP on loopback);
// ns/oneway is half the round trip.
func BenchmarkNetPingPong(b *testing.B) {
	c0, c1 := twoCPUs(b)
	w := benchNetWorld(b)
	done := make(chan error)
	go func() {
		defer pin(b, c1)()
		ep := w.Endpoint(1)
		buf := make([]byte, 8)
		for {
			st, err := ep.Recv(buf, 0, AnyTag, 0)
			if err != nil || st.Tag == 999 {
				done <- err
				return
			}
			if err := ep.Send(buf, 0, 1, 0, Standard); err != nil {
				done <- err
				return
			}
		}
	}()
	defer pin(b, c0)()
	ep := w.Endpoint(0)
	buf := make([]byte, 8)
	for range 1000 { // warm up
		ep.Send(buf, 1, 1, 0, Standard)
		ep.Recv(buf, 1, 1, 0)
	}
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		if err := ep.Send(buf, 1, 1, 0, Standard); err != nil {
			b.Fatal(err)
		}
		if _, err := ep.Recv(buf, 1, 1, 0); err != nil {
			b.Fatal(err)
		}
	}
	el := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(el.Nanoseconds())/float64(2*b.N), "ns/oneway")
	ep.Send(nil, 1, 999, 0, Standard)
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}

// BenchmarkNetMsgRate: windows of 64 nonblocking 8-byte sends over the
// network transport (UDP on loopback) to a receiver with 64 receives
// posted, each window acknowledged (OSU message rate).
func BenchmarkNetMsgRate(b *testing.B) {
	c0, c1 := twoCPUs(b)
	w := benchNetWorld(b)
	windows := max(1, b.N/window)
	const warm = 10
	done := make(chan error)
	go func() {
		defer pin(b, c1)()
		ep := w.Endpoint(1)
		buf := make([]byte, 8)
		reqs := make([]*Request, window)
		for range warm + windows {
			for i := range reqs {
				r, err := ep.Irecv(buf, 0, 1, 0)
				if err != nil {
					done <- err
					return
				}
				reqs[i] = r
			}
			for _, r := range reqs {
				if _, err := r.Wait(); err != nil {
					done <- err
					return
				}
			}
			if err := ep.Send(buf[:4], 0, 2, 0, Standard); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	defer pin(b, c0)()
	ep := w.Endpoint(0)
	buf := make([]byte, 8)
	ack := make([]byte, 4)
	reqs := make([]*Request, window)
	var start time.Time
	for w := -warm; w < windows; w++ {
		if w == 0 {
			b.ResetTimer()
			start = time.Now()
		}
		for i := range reqs {
			r, err := ep.Isend(buf, 1, 1, 0, Standard)
			if err != nil {
				b.Fatal(err)
			}
			reqs[i] = r
		}
		for _, r := range reqs {
			if _, err := r.Wait(); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := ep.Recv(ack, 1, 2, 0); err != nil {
			b.Fatal(err)
		}
	}
	el := time.Since(start).Seconds()
	b.StopTimer()
	b.ReportMetric(float64(windows*window)/el/1e6, "Mmsg/s")
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}
