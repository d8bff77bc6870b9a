package engine

import (
	"runtime"
	"testing"

	"github.com/tachyon-hpc/tachyon/internal/testcvar"
	"github.com/tachyon-hpc/tachyon/nic"
	"github.com/tachyon-hpc/tachyon/pvar"
	"golang.org/x/sys/unix"
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

// kickMeter returns what reports frames/kick when the benchmark is done:
// the frames the process's links sent per system call that woke the
// kernel's transmit side or sent a UDP batch (nic_tx_frames over
// nic_tx_kicks), from now on.
func kickMeter(b *testing.B) func() {
	f, _ := pvar.Lookup("nic_tx_frames")
	k, _ := pvar.Lookup("nic_tx_kicks")
	f0, k0 := f.Read(), k.Read()
	return func() {
		b.ReportMetric(float64(f.Read()-f0)/float64(max(k.Read()-k0, 1)), "frames/kick")
	}
}

// BenchmarkNetPingPong: two goroutine ranks, each pinned to a CPU, bounce
// an 8-byte message over the network transport (UDP on loopback);
// ns/oneway is half the round trip.
func BenchmarkNetPingPong(b *testing.B) {
	c0, c1 := twoCPUs(b)
	kicks := kickMeter(b) // the warm-up counts too: one frame a kick either way
	goPingPong(b, benchNetWorld(b), c0, c1, 1000)
	kicks()
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
		done <- sinkWindows(w.Endpoint(1), make([]byte, 8))
	}()
	defer pin(b, c0)()
	ep := w.Endpoint(0)
	kicks := kickMeter(b)
	el := sendWindows(b, ep, make([]byte, 8), warm, windows)
	b.ReportMetric(float64(windows*window)/el/1e6, "Mmsg/s")
	kicks()
	stopSink(ep)
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}

// threadCPU locks the benchmark to its thread and returns what reports
// the thread's CPU time per op (cpu-ns/op) when the loop is done: unlike
// the wall clock, it leaves out the time other processes of a loaded
// machine take the CPU away.
func threadCPU(b *testing.B) func() {
	runtime.LockOSThread()
	var r0 unix.Rusage
	unix.Getrusage(unix.RUSAGE_THREAD, &r0)
	b.ResetTimer()
	return func() {
		var r1 unix.Rusage
		unix.Getrusage(unix.RUSAGE_THREAD, &r1)
		runtime.UnlockOSThread()
		ns := (r1.Utime.Nano() + r1.Stime.Nano()) - (r0.Utime.Nano() + r0.Stime.Nano())
		b.ReportMetric(float64(ns)/float64(b.N), "cpu-ns/op")
	}
}

// BenchmarkNetConnPath: the CPU cost of a network connection's own work,
// over a link in memory (no kernel, no second rank, so that a loaded
// machine blurs it least). pingpong: one 8-byte packet sent in a frame
// of its own, and one received in a frame that acknowledges it, taken
// through the device and delivered, per op. window: 64 packets sent,
// packed into frames, then one acknowledgement of them all, per op.
func BenchmarkNetConnPath(b *testing.B) {
	const peerEpoch = 7
	testcvar.Set(b, "engine_net_auth", "false") // the device takes no job key
	setup := func(b *testing.B) (*memLink, *netDev, *netConn) {
		l := newMemLink(1024, 1500)
		d, err := newNetDev(l, 1, 1, 3, 2, nil)
		if err != nil {
			b.Fatal(err)
		}
		c := newNetConn(d, 0, 0, peerEpoch, d.clock())
		c.max = 1500 - nic.HeaderLen - pktLen
		d.conns[0] = c
		d.list = append(d.list, c)
		return l, d, c
	}
	b.Run("pingpong", func(b *testing.B) {
		l, d, c := setup(b)
		var f [1]nic.Frame
		defer threadCPU(b)()
		for range b.N {
			p := c.Reserve(8)
			p[0] = 1
			c.Commit(8)
			// The answer, acknowledging it.
			l.Alloc(f[:])
			buf := l.Bytes(f[0])
			h := nic.Header{Type: nic.TypeData, Length: pktLen + 8, Cookie: 1, Src: 0, Dst: 1, Epoch: peerEpoch,
				Seq: c.rcvNxt, Ack: c.sndSent, Credit: uint16(c.window)}
			h.Put(buf)
			buf[nic.HeaderLen], buf[nic.HeaderLen+1] = 8, 0
			rx := nic.RxDesc{Frame: f[0], Data: buf[:nic.HeaderLen+pktLen+8]}
			d.now = d.clock()
			d.frame(&rx)
			if n, _ := c.Peek(1); n != 1 {
				b.Fatal("no packet delivered")
			}
			_ = c.Packet(0)
			c.Release(1)
			l.sent = l.sent[:0]
		}
	})
	b.Run("window", func(b *testing.B) {
		_, d, c := setup(b)
		l := d.link.(*memLink)
		defer threadCPU(b)()
		for range b.N {
			for range 64 {
				p := c.Reserve(8)
				if p == nil {
					b.Fatal("no room")
				}
				p[0] = 1
				c.Commit(8)
			}
			c.flush()
			d.now = d.clock()
			c.onAck(c.sndSent, 0, uint16(c.window))
			d.flushReleased()
			l.sent = l.sent[:0]
		}
	})
}
