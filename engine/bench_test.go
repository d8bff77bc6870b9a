package engine

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/tachyon-hpc/tachyon/internal/affinity"
	"github.com/tachyon-hpc/tachyon/internal/testskip"
)

// window is the number of nonblocking sends in flight in the message-rate
// and bandwidth benchmarks, as in the OSU benchmarks and the MPI anchor.
const window = 64

// twoCPUs returns two CPUs this process may run on, or skips.
func twoCPUs(b testing.TB) (int, int) {
	cpus, err := affinity.Threads()
	if errors.Is(err, affinity.ErrUnsupported) {
		testskip.Skip(b, testskip.NotLinux, "cannot read CPU affinity:", err)
	}
	if err != nil {
		b.Fatal(err)
	}
	if len(cpus) < 2 {
		testskip.Skip(b, testskip.FewCPUs, "needs two CPUs")
	}
	return cpus[0], cpus[1]
}

// pin locks the calling goroutine to its thread and the thread to cpu
// until the returned function undoes it.
func pin(b testing.TB, cpu int) func() {
	runtime.LockOSThread()
	restore, err := affinity.Bind(cpu)
	if err != nil {
		runtime.UnlockOSThread()
		if errors.Is(err, affinity.ErrUnsupported) {
			testskip.Skip(b, testskip.NotLinux, "cannot pin:", err)
		}
		b.Fatal("cannot pin:", err)
	}

	return func() {
		restore()
		runtime.UnlockOSThread()
	}
}

// pinEnv pins a child rank to the CPU in ENGINE_TEST_CPU, if set (only a
// benchmark that could pin itself sets it).
func pinEnv() {
	if s := os.Getenv("ENGINE_TEST_CPU"); s != "" {
		cpu, _ := strconv.Atoi(s)
		runtime.LockOSThread()
		affinity.Bind(cpu)
	}
}

// shmCase is one configuration of a shared-memory benchmark: a message
// size, with both endpoints locked (any goroutine may call them) or serial
// (SetSerial: one goroutine at a time, MPI_THREAD_SERIALIZED and below).
type shmCase struct {
	name   string
	size   int
	serial bool
}

// shmCases runs every size locked, and the first one serial as well:
// "8" and "8-serial".
func shmCases(sizes ...int) []shmCase {
	var cs []shmCase
	for i, n := range sizes {
		cs = append(cs, shmCase{fmt.Sprint(n), n, false})
		if i == 0 {
			cs = append(cs, shmCase{fmt.Sprint(n) + "-serial", n, true})
		}
	}
	return cs
}

// serialEnv tells a child endpoint to run serially.
const serialEnv = "ENGINE_TEST_SERIAL"

func setSerial(b testing.TB, ep *Endpoint, on bool) {
	if err := ep.SetSerial(on); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkShmPingPong: two processes pinned to different cores bounce a
// message of 8 B, 1 KiB or 16 KiB; ns/oneway is half the round trip.
func BenchmarkShmPingPong(b *testing.B) {
	for _, c := range shmCases(8, 1024, 16<<10) {
		b.Run(c.name, func(b *testing.B) {
			c0, c1 := twoCPUs(b)
			defer pin(b, c0)()
			ep, kids := startJobB(b, "pong", "ENGINE_TEST_CPU="+strconv.Itoa(c1), "ENGINE_TEST_SIZE="+strconv.Itoa(c.size),
				serialEnv+"="+strconv.FormatBool(c.serial))
			setSerial(b, ep, c.serial)
			pingPong(b, ep, make([]byte, c.size), 1000)
			kids[0].Wait()
		})
	}
}

// BenchmarkShmMsgRate: windows of 64 nonblocking sends to a receiver
// with 64 receives posted, each window acknowledged (OSU message rate).
func BenchmarkShmMsgRate(b *testing.B) {
	for _, c := range shmCases(8, 1<<20, 4<<20) {
		size := c.size
		b.Run(c.name, func(b *testing.B) {
			c0, c1 := twoCPUs(b)
			defer pin(b, c0)()
			ep, kids := startJobB(b, "sink", "ENGINE_TEST_CPU="+strconv.Itoa(c1), "ENGINE_TEST_SIZE="+strconv.Itoa(size), serialEnv+"="+strconv.FormatBool(c.serial))
			setSerial(b, ep, c.serial)
			buf := make([]byte, size)
			windows := max(1, b.N/window)
			const warm = 10 // the child's start-up stays out of the timing
			el := sendWindows(b, ep, buf, warm, windows)
			msgs := float64(windows * window)
			b.ReportMetric(msgs/el/1e6, "Mmsg/s")
			b.ReportMetric(msgs*float64(size)/el/1e6, "MB/s")
			stopSink(ep)
			kids[0].Wait()
		})
	}
}

// BenchmarkInprocPingPong: two goroutine ranks bounce an 8-byte message.
func BenchmarkInprocPingPong(b *testing.B) {
	c0, c1 := twoCPUs(b)
	w, err := NewWorld(2)
	if err != nil {
		b.Fatal(err)
	}
	goPingPong(b, w, c0, c1, 0)
}

// BenchmarkMatchUnexpected: a receive for the last of N unexpected
// messages with distinct tags. Flat matching costs the same for N = 10
// and N = 10,000; a linear queue would scan all N.
func BenchmarkMatchUnexpected(b *testing.B) {
	for _, n := range []int{10, 10000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			w, err := NewWorld(1)
			if err != nil {
				b.Fatal(err)
			}
			ep := w.Endpoint(0)
			defer ep.Close()
			buf := make([]byte, 8)
			for t := 0; t < n; t++ {
				if err := ep.Send(buf, 0, t, 0, Standard); err != nil {
					b.Fatal(err)
				}
				ep.Progress().Progress()
			}
			for ep.Progress().Progress() > 0 {
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				// Take the last message, then put it back at the end.
				ep.lock()
				u := ep.m.findUnexpected(0, 0, n-1)
				ep.unlock()
				if u == nil {
					b.Fatal("message not found")
				}
				if _, err := ep.Recv(buf, 0, n-1, 0); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				ep.Send(buf, 0, n-1, 0, Standard)
				for ep.Progress().Progress() > 0 {
				}
				b.StartTimer()
			}
		})
	}
}

// BenchmarkSelfSendRecv: an 8-byte message to this rank and its receive,
// on one goroutine: the software cost of one message end to end, with no
// cross-core transfer in it.
func BenchmarkSelfSendRecv(b *testing.B) {
	for _, c := range []struct {
		name           string
		posted, serial bool
	}{{"unexpected", false, false}, {"posted", true, false}, {"unexpected-serial", false, true}, {"posted-serial", true, true}} {
		posted := c.posted
		b.Run(c.name, func(b *testing.B) {
			w, err := NewWorld(1)
			if err != nil {
				b.Fatal(err)
			}
			ep := w.Endpoint(0)
			defer ep.Close()
			setSerial(b, ep, c.serial)
			buf := make([]byte, 8)
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if posted {
					r, _ := ep.Irecv(buf, 0, 1, 0)
					ep.Send(buf, 0, 1, 0, Standard)
					r.Wait()
				} else {
					ep.Send(buf, 0, 1, 0, Standard)
					ep.Recv(buf, 0, 1, 0)
				}
			}
		})
	}
}

// BenchmarkSelfWindow: windows of 64 receives and 64 sends of 8 bytes to
// this rank, then waits: the software cost per message of the
// message-rate pattern, with no cross-core transfer in it.
func BenchmarkSelfWindow(b *testing.B) {
	b.Run("locked", func(b *testing.B) { selfWindow(b, false) })
	b.Run("serial", func(b *testing.B) { selfWindow(b, true) })
}

func selfWindow(b *testing.B, serial bool) {
	w, err := NewWorld(1)
	if err != nil {
		b.Fatal(err)
	}
	ep := w.Endpoint(0)
	defer ep.Close()
	setSerial(b, ep, serial)
	buf := make([]byte, 8)
	rr := make([]*Request, window)
	sr := make([]*Request, window)
	b.ReportAllocs()
	for i := 0; i < b.N; i += window {
		for j := range rr {
			rr[j], _ = ep.Irecv(buf, 0, 1, 0)
		}
		for j := range sr {
			sr[j], _ = ep.Isend(buf, 0, 1, 0, Standard)
		}
		for j := range sr {
			sr[j].Wait()
			rr[j].Wait()
		}
	}
}

// BenchmarkEmptyPoll measures a poll that finds nothing, by an endpoint
// of a two-rank world with a receive pending: the loop of a goroutine
// waiting for a message, which finds it on average half a poll after it
// lands. Serial: the endpoint and its progress engine in serial mode, as
// the facade runs them below ThreadMultiple.
func BenchmarkEmptyPoll(b *testing.B) {
	for _, serial := range []bool{false, true} {
		name := "locked"
		if serial {
			name = "serial"
		}
		b.Run(name, func(b *testing.B) {
			w, err := NewWorld(2)
			if err != nil {
				b.Fatal(err)
			}
			ep := w.Endpoint(0)
			defer ep.Close()
			if err := ep.SetSerial(serial); err != nil {
				b.Fatal(err)
			}
			if err := ep.Progress().SetSerial(serial); err != nil {
				b.Fatal(err)
			}
			if _, err := ep.Irecv(make([]byte, 8), 1, 1, 0); err != nil {
				b.Fatal(err)
			}
			pe := ep.Progress()
			b.ResetTimer()
			for range b.N {
				if pe.Progress() != 0 {
					b.Fatal("a poll found work")
				}
			}
		})
	}
}

// sendWindows sends warm and then windows windows of window nonblocking
// sends of buf to rank 1 (tag 1), each acknowledged by a 4-byte message
// (tag 2), the OSU message rate's sender; it times the windows alone and
// returns their seconds, with the benchmark's timer stopped.
func sendWindows(b *testing.B, ep *Endpoint, buf []byte, warm, windows int) float64 {
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
	return el
}

// sinkWindows is sendWindows's receiver, rank 1: windows of window
// receives into buf from rank 0, each window acknowledged by a 4-byte
// message (tag 2), until a message of tag 999 (stopSink).
func sinkWindows(ep *Endpoint, buf []byte) error {
	reqs := make([]*Request, window)
	for {
		for i := range reqs {
			r, err := ep.Irecv(buf, 0, AnyTag, 0)
			if err != nil {
				return err
			}
			reqs[i] = r
		}
		for _, r := range reqs {
			st, err := r.Wait()
			if err != nil {
				return err
			}
			if st.Tag == 999 {
				return nil
			}
		}
		if err := ep.Send(buf[:4], 0, 2, 0, Standard); err != nil {
			return err
		}
	}
}

// stopSink ends rank 1's sinkWindows: a window of messages of tag 999,
// so that the first of them ends a window however many it has taken.
func stopSink(ep *Endpoint) {
	for range window {
		ep.Send(nil, 1, 999, 0, Standard)
	}
}

// pingPong bounces buf off rank 1 (pong) warm times, then b.N times
// timed, reported as ns/oneway (half a round trip); then it stops rank 1
// with a message of tag 999.
func pingPong(b *testing.B, ep *Endpoint, buf []byte, warm int) {
	for range warm {
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
}

// pong is pingPong's other side, rank 1: it sends each message from rank
// 0 into buf back to it (tag 1), until one of tag 999.
func pong(ep *Endpoint, buf []byte) error {
	for {
		st, err := ep.Recv(buf, 0, AnyTag, 0)
		if err != nil || st.Tag == 999 {
			return err
		}
		if err := ep.Send(buf[:st.Count], 0, 1, 0, Standard); err != nil {
			return err
		}
	}
}

// goPingPong runs pingPong of an 8-byte message between the two ranks of
// w, rank 0 on this goroutine pinned to CPU c0, rank 1 on another pinned
// to c1.
func goPingPong(b *testing.B, w *World, c0, c1, warm int) {
	done := make(chan error)
	go func() {
		defer pin(b, c1)()
		done <- pong(w.Endpoint(1), make([]byte, 8))
	}()
	defer pin(b, c0)()
	pingPong(b, w.Endpoint(0), make([]byte, 8), warm)
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}
