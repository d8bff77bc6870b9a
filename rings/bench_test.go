package rings

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"runtime"
	"testing"

	"github.com/tachyon-hpc/tachyon/asm"
	"github.com/tachyon-hpc/tachyon/internal/testskip"
)

// Benchmarks. The process benchmarks re-execute the test binary as the
// other side (see process_test.go), pin the two processes to different
// CPUs and make a new segment for every run, since a side of a ring, once
// its process has exited, cannot be attached again. Timing starts once
// the child is up and has shown its first message, so process start-up is
// not counted.
//
//	go test -run XXX -bench . ./rings
//
// Each benchmark that compares two things runs them as sub-benchmarks of
// one function, so they share a run (and the machine's mood).

// benchSegment makes a named segment for one benchmark run, or skips the
// benchmark where shared memory cannot be had.
func benchSegment(b *testing.B, size int) *Segment {
	b.Helper()
	if runtime.GOOS != "linux" {
		testskip.Skip(b, testskip.NotLinux, "shared-memory segments need Linux")
	}
	if st, err := os.Stat(shmDir.Get()); errors.Is(err, fs.ErrNotExist) || err == nil && !st.IsDir() {
		testskip.Skipf(b, testskip.NoSharedMemory, "no shared-memory directory %s (rings_shm_dir)", shmDir.Get())
	} else if err != nil {
		b.Fatal(err)
	}
	s, err := CreateSegment(testName(), size)
	if errors.Is(err, ErrUnsupported) || errors.Is(err, fs.ErrPermission) {
		testskip.Skip(b, testskip.NoSharedMemory, "cannot create a shared-memory segment:", err)
	}

	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		s.Remove()
		s.Close()
	})
	return s
}

// pingPongCells is the size of each cell ring of the ping-pong benchmarks:
// large enough that a producer rereads the consumer's head only once every
// 64 messages.
const pingPongCells = 64

// BenchmarkPingPongProcesses measures the one-way latency of an 8-byte
// message between two processes pinned to different CPUs, through a pair
// of cell rings (the child echoes each message back), beside two floors
// measured between the same two pinned processes with bare release stores
// and acquire loads:
//
//   - floor: one cache-line word ping-ponged back and forth, the floor of
//     any shared-memory handoff;
//   - walk: the i-th value carried in line i mod 64 of 64 lines per
//     direction, as a ring of 64 cells carries its messages: the cost of
//     the cache lines alone, without any ring logic.
//
// ns/op is one round trip; ns/oneway is half of it. The ring also reports
// its one-way latency over each floor measured before it in the same run
// (ring/floor, ring/walk).
func BenchmarkPingPongProcesses(b *testing.B) {
	cpuA, cpuB := twoCPUs(b)
	var floor, walk float64
	b.Run("floor", func(b *testing.B) {
		floor = floorPingPong(b, cpuA, cpuB, 1)
	})
	b.Run("walk", func(b *testing.B) {
		walk = floorPingPong(b, cpuA, cpuB, pingPongCells)
	})
	b.Run("ring", func(b *testing.B) {
		ns := ringPingPong(b, cpuA, cpuB)
		if floor > 0 {
			b.ReportMetric(ns/floor, "ring/floor")
		}
		if walk > 0 {
			b.ReportMetric(ns/walk, "ring/walk")
		}
	})
	b.Run("record", func(b *testing.B) {
		ns := recordPingPong(b, cpuA, cpuB)
		if floor > 0 {
			b.ReportMetric(ns/floor, "ring/floor")
		}
	})
}

// recordPingPongBytes is the data area of each record ring of the record
// ping-pong: the engine's default.
const recordPingPongBytes = 256 << 10

// recordPingPong is ringPingPong over record rings, read the way the
// engine reads them (Peek, Record, Release).
func recordPingPong(b *testing.B, cpuA, cpuB int) float64 {
	size := RecordRingSize(recordPingPongBytes)
	s := benchSegment(b, SegmentSize(size, size))
	ia, ra, err := s.NewRecordRing(recordPingPongBytes)
	if err != nil {
		b.Fatal(err)
	}
	_, rb, err := s.NewRecordRing(recordPingPongBytes)
	if err != nil {
		b.Fatal(err)
	}
	w, err := ra.Writer()
	if err != nil {
		b.Fatal(err)
	}
	rd, err := rb.Reader()
	if err != nil {
		b.Fatal(err)
	}
	defer pinCurrent(b, cpuA)()
	ch := startChild(b, "pingpong-record", s, "RING", itoa(ia), "N", itoa(b.N), "CPU", itoa(cpuB))
	if _, err := peekOne(rd); err != nil { // the child is ready
		b.Fatalf("%v\n%s", err, ch.stderr.Bytes())
	}
	rd.Release(1)
	var msg [8]byte
	b.ResetTimer()
	for i := range b.N {
		binary.LittleEndian.PutUint64(msg[:], uint64(i))
		if err := w.Write(1, msg[:]); err != nil {
			b.Fatal(err)
		}
		m, err := peekOne(rd)
		if err != nil || len(m) != 8 || binary.LittleEndian.Uint64(m) != uint64(i) {
			b.Fatalf("echo %d: %d bytes, %v\n%s", i, len(m), err, ch.stderr.Bytes())
		}
		rd.Release(1)
	}
	b.StopTimer()
	ch.wait(b)
	return oneway(b)
}

// peekOne waits for the next record of rd and returns it, unreleased.
func peekOne(rd *RecordReader) ([]byte, error) {
	s := newSpinner()
	for {
		k, err := rd.Peek(1)
		if err != nil {
			return nil, err
		}
		if k == 1 {
			return rd.Record(0), nil
		}
		if s.spin() {
			if err := rd.Check(); err != nil {
				return nil, err
			}
		}
	}
}

// floorPingPong ping-pongs values through lines cache lines per direction
// of a raw region with a "floor" child and returns the one-way time in
// ns.
func floorPingPong(b *testing.B, cpuA, cpuB, lines int) float64 {
	s := benchSegment(b, SegmentSize(floorSize(lines)))
	i, mem, err := s.NewRegion(floorSize(lines))
	if err != nil {
		b.Fatal(err)
	}
	ping, pong, ready := floorWords(mem, lines)
	mask := uint64(lines - 1)
	defer pinCurrent(b, cpuA)()
	ch := startChild(b, "floor", s, "RING", itoa(i), "N", itoa(b.N), "LINES", itoa(lines), "CPU", itoa(cpuB))
	for sp := newSpinner(); asm.LoadAcquire64(ready) == 0; {
		if sp.spin() && childExited(ch) {
			b.Fatalf("floor child failed: %s", ch.exitStatus())
		}
	}
	b.ResetTimer()
	for v := uint64(1); v <= uint64(b.N); v++ {
		off := uintptr(v&mask) * CacheLine
		asm.StoreRelease64(word64(ping, off), v)
		for asm.LoadAcquire64(word64(pong, off)) != v {
		}
	}
	b.StopTimer()
	ch.wait(b)
	return oneway(b)
}

// ringPingPong sends 8-byte messages to a "pingpong" child through one
// cell ring and receives its echoes through another, and returns the
// one-way time in ns.
func ringPingPong(b *testing.B, cpuA, cpuB int) float64 {
	size := CellRingSize(pingPongCells, 64)
	s := benchSegment(b, SegmentSize(size, size))
	ia, ra, err := s.NewCellRing(pingPongCells, 64)
	if err != nil {
		b.Fatal(err)
	}
	_, rb, err := s.NewCellRing(pingPongCells, 64)
	if err != nil {
		b.Fatal(err)
	}
	p, err := ra.Producer()
	if err != nil {
		b.Fatal(err)
	}
	c, err := rb.Consumer()
	if err != nil {
		b.Fatal(err)
	}
	defer pinCurrent(b, cpuA)()
	ch := startChild(b, "pingpong", s, "RING", itoa(ia), "N", itoa(b.N), "CPU", itoa(cpuB))
	var buf [64]byte
	if _, err := c.Recv(buf[:]); err != nil { // the child is ready
		b.Fatalf("%v\n%s", err, ch.stderr.Bytes())
	}
	msg := buf[:8]
	b.ResetTimer()
	for i := range b.N {
		binary.LittleEndian.PutUint64(msg, uint64(i))
		if err := p.Send(msg); err != nil {
			b.Fatal(err)
		}
		n, err := c.Recv(buf[:])
		if err != nil || n != 8 || binary.LittleEndian.Uint64(buf[:]) != uint64(i) {
			b.Fatalf("echo %d: %d bytes, %v\n%s", i, n, err, ch.stderr.Bytes())
		}
	}
	b.StopTimer()
	ch.wait(b)
	return oneway(b)
}

// oneway reports and returns half the time of one iteration.
func oneway(b *testing.B) float64 {
	ns := float64(b.Elapsed().Nanoseconds()) / float64(2*b.N)
	b.ReportMetric(ns, "ns/oneway")
	return ns
}

// childExited reports whether the child has exited.
func childExited(c *child) bool {
	select {
	case err := <-c.done:
		c.done <- err
		return true
	default:
		return false
	}
}

// exitStatus describes how an exited child ended, with what it wrote to
// its standard error.
func (c *child) exitStatus() string {
	err := <-c.done
	c.done <- err
	return fmt.Sprintf("%v\n%s", err, c.stderr.Bytes())
}

// tputBatch is the batch a throughput producer claims and its consumer
// peeks at once.
const tputBatch = 64

// BenchmarkThroughputProcesses measures the message rate from one producer
// process to one consumer process, pinned to different CPUs: cell rings
// filled and drained in batches of 64 (Claim/Slot/Commit/Publish,
// Peek/Message/Release), and record rings (one Write per record, the
// reader's Poll taking up to 64). Every message carries its sequence
// number, which the consumer checks.
func BenchmarkThroughputProcesses(b *testing.B) {
	cpuA, cpuB := twoCPUs(b)
	for _, size := range []int{8, 64} {
		b.Run("cell/"+itoa(size)+"B", func(b *testing.B) { cellThroughput(b, cpuA, cpuB, size) })
	}
	for _, size := range []int{8, 64} {
		b.Run("record/"+itoa(size)+"B", func(b *testing.B) { recordThroughput(b, cpuA, cpuB, size, 1) })
	}
	for _, size := range []int{8, 64} {
		b.Run("record-batch/"+itoa(size)+"B", func(b *testing.B) { recordThroughput(b, cpuA, cpuB, size, tputBatch) })
	}
	for _, size := range []int{24, 64} {
		b.Run("record-next/"+itoa(size)+"B", func(b *testing.B) { recordNextThroughput(b, cpuA, cpuB, size, 0) })
	}
	// A writer with work of its own between records (10 and 20 steps: 24-27
	// and 37-44 ns a record here, far, against 16-18 without): a reader that
	// keeps up reads each record as it lands, in the line the writer is
	// filling.
	for _, work := range []int{10, 20} {
		b.Run("record-next-paced"+itoa(work)+"/24B", func(b *testing.B) { recordNextThroughput(b, cpuA, cpuB, 24, work) })
	}
}

// cellThroughput receives b.N messages of size bytes from a "tput-cell"
// child.
func cellThroughput(b *testing.B, cpuA, cpuB, size int) {
	const cells = 1024
	cellSize := 64
	for cellSize-cellHeader < size {
		cellSize *= 2
	}
	s := benchSegment(b, SegmentSize(CellRingSize(cells, cellSize)))
	i, r, err := s.NewCellRing(cells, cellSize)
	if err != nil {
		b.Fatal(err)
	}
	c, err := r.Consumer()
	if err != nil {
		b.Fatal(err)
	}
	defer pinCurrent(b, cpuA)()
	ch := startChild(b, "tput-cell", s, "RING", itoa(i), "N", itoa(b.N),
		"SIZE", itoa(size), "BATCH", itoa(tputBatch), "CPU", itoa(cpuB))
	sp := newSpinner()
	for c.r.Len() == 0 { // wait for the child without taking anything
		if sp.spin() && childExited(ch) && c.r.Len() == 0 {
			b.Fatalf("producer failed: %s", ch.exitStatus())
		}
	}
	b.ResetTimer()
	for got := 0; got < b.N; {
		k, err := c.Peek(tputBatch)
		if err != nil {
			b.Fatal(err)
		}
		if k == 0 {
			if sp.spin() {
				// A producer that has exited may have published
				// everything before it went: fail only if nothing is
				// ready once its death is known.
				if err := c.Check(); err != nil {
					if k, _ := c.Peek(1); k == 0 {
						b.Fatalf("after %d messages: %v: %s", got, err, ch.exitStatus())
					}
					c.Release(0)
				}
			}
			continue
		}
		for j := range k {
			m := c.Message(j)
			if len(m) != size || binary.LittleEndian.Uint64(m) != uint64(got+j) {
				b.Fatalf("message %d: %d bytes, seq %d", got+j, len(m), binary.LittleEndian.Uint64(m))
			}
		}
		c.Release(k)
		got += k
	}
	b.StopTimer()
	ch.wait(b)
	rate(b)
}

// recordThroughput reads b.N records of size bytes from a "tput-record"
// child, which writes them one by one or, if batch > 1, batch at a time
// between Hold and Flush.
func recordThroughput(b *testing.B, cpuA, cpuB, size, batch int) {
	rd, ch, unpin := recordStream(b, cpuA, cpuB, "SIZE", itoa(size), "BATCH", itoa(batch))
	defer unpin()
	next := make([]uint64, 1)
	fn := seqChecker(b, next, size)
	readRecords(b, rd, ch, b.N, fn, func() { b.ResetTimer() })
	b.StopTimer()
	ch.wait(b)
	rate(b)
}

// recordNextThroughput reads b.N records of size bytes from a
// "tput-record" child the way the engine does: the child writes them with
// TryWriteWords after work steps of its own, the reader takes them one at
// a time with Next, each poll releasing the records the previous one read.
func recordNextThroughput(b *testing.B, cpuA, cpuB, size, work int) {
	rd, ch, unpin := recordStream(b, cpuA, cpuB, "SIZE", itoa(size), "WORDS", "1", "WORK", itoa(work))
	defer unpin()
	awaitRecords(b, rd, ch)
	b.ResetTimer()
	sp := newSpinner()
	seq, held := uint64(0), 0
	for seq < uint64(b.N) {
		rd.Release(held)
		held = 0
		for {
			p, err := rd.Next(tputBatch)
			if err != nil {
				b.Fatalf("after %d records: %v", seq, err)
			}
			if p == nil {
				break
			}
			if len(p) != size || binary.LittleEndian.Uint64(p) != seq {
				b.Fatalf("record %d: %d bytes, seq %d", seq, len(p), binary.LittleEndian.Uint64(p))
			}
			seq++
			held++
		}
		if held == 0 && sp.spin() && childExited(ch) && asm.LoadAcquire64(rd.tailp) == rd.head {
			b.Fatalf("after %d records: producer failed: %s", seq, ch.exitStatus())
		}
	}
	rd.Release(held)
	b.StopTimer()
	ch.wait(b)
	rate(b)
}

// recordStream makes a record ring, pins the calling goroutine to cpuA
// (unpin undoes it) and starts a "tput-record" child on cpuB writing b.N
// records into it, with env (keys and values) saying how.
func recordStream(b *testing.B, cpuA, cpuB int, env ...string) (rd *RecordReader, ch *child, unpin func()) {
	const capacity = 1 << 18
	s := benchSegment(b, SegmentSize(RecordRingSize(capacity)))
	i, r, err := s.NewRecordRing(capacity)
	if err != nil {
		b.Fatal(err)
	}
	if rd, err = r.Reader(); err != nil {
		b.Fatal(err)
	}
	unpin = pinCurrent(b, cpuA)
	ch = startChild(b, "tput-record", s, append([]string{"RING", itoa(i), "N", itoa(b.N), "CPU", itoa(cpuB)}, env...)...)
	return rd, ch, unpin
}

// awaitRecords waits until a record has been published, and fails the
// benchmark if the producer dies first.
func awaitRecords(b *testing.B, rd *RecordReader, ch *child) {
	sp := newSpinner()
	for asm.LoadAcquire64(rd.tailp) == rd.head {
		// The producer may have written everything and exited since
		// the tail was loaded: look at the tail again before failing.
		if sp.spin() && childExited(ch) && asm.LoadAcquire64(rd.tailp) == rd.head {
			b.Fatalf("producer failed: %s", ch.exitStatus())
		}
	}
}

// seqChecker returns a handler that checks that the records of type id+1
// carry the sequence numbers next[id], next[id]+1, ... and are size bytes.
func seqChecker(b *testing.B, next []uint64, size int) Handler {
	return func(typ uint32, p []byte) {
		id := int(typ) - 1
		if id < 0 || id >= len(next) || len(p) != size || binary.LittleEndian.Uint64(p) != next[id] {
			b.Fatalf("record of type %d, %d bytes: want seq %v", typ, len(p), next)
		}
		next[id]++
	}
}

// readRecords reads n records, calling start once the first has arrived
// (before it is read), and fails the benchmark if a producer dies first.
func readRecords(b *testing.B, rd *RecordReader, ch *child, n int, fn Handler, start func()) {
	awaitRecords(b, rd, ch)
	start()
	for got := 0; got < n; {
		// Read returns an error only once the producer closed or died
		// and everything it published has been read.
		k, err := rd.Read(fn, tputBatch)
		if err != nil {
			b.Fatalf("after %d records: %v\n%s", got, err, ch.stderr.Bytes())
		}
		got += k
	}
}

// rate reports millions of messages per second, one message per iteration.
func rate(b *testing.B) {
	if s := b.Elapsed().Seconds(); s > 0 {
		b.ReportMetric(float64(b.N)/s/1e6, "Mmsg/s")
	}
}

// BenchmarkMPSCProcesses measures the rate at which one reader drains
// 8-byte records from a many-to-one ring written by several producer
// processes at once. The reader is pinned to one CPU and the producers to
// the other: on a two-CPU machine they share it.
func BenchmarkMPSCProcesses(b *testing.B) {
	cpuA, cpuB := twoCPUs(b)
	for _, producers := range []int{1, 2, 4} {
		b.Run("producers="+itoa(producers), func(b *testing.B) { mpscThroughput(b, cpuA, cpuB, producers) })
	}
}

func mpscThroughput(b *testing.B, cpuA, cpuB, producers int) {
	const capacity, size = 1 << 18, 8
	s := benchSegment(b, SegmentSize(MPSCRingSize(capacity)))
	i, r, err := s.NewMPSCRing(capacity)
	if err != nil {
		b.Fatal(err)
	}
	rd, err := r.Reader()
	if err != nil {
		b.Fatal(err)
	}
	defer pinCurrent(b, cpuA)()
	var kids []*child
	for id := range producers {
		n := b.N / producers
		if id == 0 {
			n += b.N % producers
		}
		kids = append(kids, startChild(b, "tput-record", s, "RING", itoa(i), "N", itoa(n),
			"SIZE", itoa(size), "ID", itoa(id), "CPU", itoa(cpuB)))
	}
	next := make([]uint64, producers)
	readRecords(b, rd, kids[0], b.N, seqChecker(b, next, size), func() { b.ResetTimer() })
	b.StopTimer()
	for _, ch := range kids {
		ch.wait(b)
	}
	rate(b)
}

// BenchmarkGoroutinePingPong measures one-way latency between two
// goroutines of one process: 8-byte messages through a pair of cell rings
// (both goroutines locked to their threads and spinning), beside a pair of
// buffered channels of [8]byte.
func BenchmarkGoroutinePingPong(b *testing.B) {
	if runtime.GOMAXPROCS(0) < 2 {
		testskip.Skip(b, testskip.FewCPUs, "needs GOMAXPROCS >= 2")
	}
	b.Run("ring", func(b *testing.B) {
		_, ap, ac := newCellPair(b, pingPongCells, 64)
		_, bp, bc := newCellPair(b, pingPongCells, 64)
		defer ap.Close() // on failure, the echo goroutine's Recv returns
		onThreads(b, func() error {
			var buf [64]byte
			for range b.N {
				n, err := ac.Recv(buf[:])
				if err == nil {
					err = bp.Send(buf[:n])
				}
				if err != nil {
					return err
				}
			}
			return nil
		}, func() {
			var buf [64]byte
			msg := buf[:8]
			for i := range b.N {
				binary.LittleEndian.PutUint64(msg, uint64(i))
				if err := ap.Send(msg); err != nil {
					b.Fatal(err)
				}
				if n, err := bc.Recv(buf[:]); err != nil || n != 8 || binary.LittleEndian.Uint64(buf[:]) != uint64(i) {
					b.Fatalf("echo %d: %d bytes, %v", i, n, err)
				}
			}
		})
		oneway(b)
	})
	b.Run("chan", func(b *testing.B) {
		ping, pong := make(chan [8]byte, 1), make(chan [8]byte, 1)
		go func() {
			for range b.N {
				pong <- <-ping
			}
		}()
		b.ResetTimer()
		for i := range b.N {
			var m [8]byte
			binary.LittleEndian.PutUint64(m[:], uint64(i))
			ping <- m
			if m = <-pong; binary.LittleEndian.Uint64(m[:]) != uint64(i) {
				b.Fatalf("echo %d", i)
			}
		}
		b.StopTimer()
		oneway(b)
	})
}

// BenchmarkGoroutineThroughput measures the rate of 8-byte messages from
// one goroutine to another: through a cell ring of 1024 cells, batched
// (Claim/Publish, Peek/Release) and one at a time (TrySend/TryRecv),
// beside a channel of [8]byte with a buffer of 1024.
func BenchmarkGoroutineThroughput(b *testing.B) {
	if runtime.GOMAXPROCS(0) < 2 {
		testskip.Skip(b, testskip.FewCPUs, "needs GOMAXPROCS >= 2")
	}
	const cells = 1024
	b.Run("ring-batch", func(b *testing.B) {
		_, p, c := newCellPair(b, cells, 64)
		defer c.Close() // on failure, the producer's Send or Check returns
		onThreads(b, func() error { return cellProduce(p, b.N, 8, tputBatch) }, func() {
			for got := 0; got < b.N; {
				k, err := c.Peek(tputBatch)
				if err != nil {
					b.Fatal(err)
				}
				for j := range k {
					if binary.LittleEndian.Uint64(c.Message(j)) != uint64(got+j) {
						b.Fatalf("message %d out of order", got+j)
					}
				}
				c.Release(k)
				got += k
				if k == 0 {
					asm.Pause()
				}
			}
		})
		rate(b)
	})
	b.Run("ring", func(b *testing.B) {
		_, p, c := newCellPair(b, cells, 64)
		defer c.Close() // on failure, the producer's Send or Check returns
		onThreads(b, func() error {
			var msg [8]byte
			for i := range b.N {
				binary.LittleEndian.PutUint64(msg[:], uint64(i))
				if err := p.Send(msg[:]); err != nil {
					return err
				}
			}
			return nil
		}, func() {
			var buf [64]byte
			for i := range b.N {
				n, err := c.Recv(buf[:])
				if err != nil || n != 8 || binary.LittleEndian.Uint64(buf[:]) != uint64(i) {
					b.Fatalf("message %d: %d bytes, %v", i, n, err)
				}
			}
		})
		rate(b)
	})
	b.Run("chan", func(b *testing.B) {
		ch := make(chan [8]byte, cells)
		go func() {
			for i := range b.N {
				var m [8]byte
				binary.LittleEndian.PutUint64(m[:], uint64(i))
				ch <- m
			}
		}()
		b.ResetTimer()
		for i := range b.N {
			if m := <-ch; binary.LittleEndian.Uint64(m[:]) != uint64(i) {
				b.Fatalf("message %d out of order", i)
			}
		}
		b.StopTimer()
		rate(b)
	})
}

// onThreads runs peer on a goroutine and timed on this one, each locked
// to its thread (the rings spin: a goroutine moved between threads
// would measure the scheduler), and times timed alone; b fails if peer
// returns an error. When timed fails b, peer is not waited for: the
// caller's deferred Close of a ring peer uses makes it return.
func onThreads(b *testing.B, peer func() error, timed func()) {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		done <- peer()
	}()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	b.ResetTimer()
	timed()
	b.StopTimer()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}
