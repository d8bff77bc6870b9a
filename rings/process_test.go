package rings

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"testing"
	"time"
	"unsafe"

	"github.com/tachyon-hpc/tachyon/asm"
	"github.com/tachyon-hpc/tachyon/internal/affinity"
	"github.com/tachyon-hpc/tachyon/internal/testrole"
	"github.com/tachyon-hpc/tachyon/internal/testskip"
)

// Multi-process tests re-execute the test binary (internal/testrole):
// TestMain runs the child role instead of the tests. Parameters travel in
// RINGS_TEST_* variables; a segment is passed by name, or as fd 3.
func TestMain(m *testing.M) {
	testrole.Main(m, func(role string) int { return testrole.Status(role, runChild(role)) })
}

func envInt(k string) int {
	n, _ := strconv.Atoi(os.Getenv("RINGS_TEST_" + k))
	return n
}

// childSegment opens the segment the parent passed.
func childSegment() (*Segment, error) {
	if name := os.Getenv("RINGS_TEST_SEG"); name != "" {
		return OpenSegment(name)
	}
	f := os.NewFile(3, "segment")
	defer f.Close()
	return OpenSegmentFile(f)
}

// pinSelf locks the calling goroutine to its thread and the thread to cpu.
func pinSelf(cpu int) error {
	runtime.LockOSThread()
	_, err := affinity.Bind(cpu)
	return err
}

// cellProducerOf, cellConsumerOf, recordWriterOf and recordReaderOf
// attach a child role to one side of ring i of seg.
func cellProducerOf(seg *Segment, i int) (*CellRing, *CellProducer, error) {
	r, err := seg.CellRing(i)
	if err != nil {
		return nil, nil, err
	}
	p, err := r.Producer()
	return r, p, err
}

func cellConsumerOf(seg *Segment, i int) (*CellRing, *CellConsumer, error) {
	r, err := seg.CellRing(i)
	if err != nil {
		return nil, nil, err
	}
	c, err := r.Consumer()
	return r, c, err
}

func recordWriterOf(seg *Segment, i int) (*RecordWriter, error) {
	r, err := seg.RecordRing(i)
	if err != nil {
		return nil, err
	}
	return r.Writer()
}

func recordReaderOf(seg *Segment, i int) (*RecordReader, error) {
	r, err := seg.RecordRing(i)
	if err != nil {
		return nil, err
	}
	return r.Reader()
}

func runChild(role string) error {
	if role == "exit" {
		return nil
	}
	seg, err := childSegment()
	if err != nil {
		return err
	}
	defer seg.Close()
	if cpu := os.Getenv("RINGS_TEST_CPU"); cpu != "" {
		c, _ := strconv.Atoi(cpu)
		if err := pinSelf(c); err != nil {
			return err
		}
	}
	n, ring, id := envInt("N"), envInt("RING"), envInt("ID")
	switch role {
	case "cell-send": // n messages (forever if n == 0) of 8..MaxPayload bytes
		r, p, err := cellProducerOf(seg, ring)
		if err != nil {
			return err
		}
		buf := make([]byte, r.MaxPayload())
		for i := uint64(0); n == 0 || i < uint64(n); i++ {
			m := buf[:8+int(i%uint64(r.MaxPayload()-7))]
			pattern(m, i)
			if err := p.Send(m); err != nil {
				return err
			}
		}
		return p.Close()
	case "cell-recv-stall": // receive n messages, then stop reading
		r, c, err := cellConsumerOf(seg, ring)
		if err != nil {
			return err
		}
		buf := make([]byte, r.MaxPayload())
		for range n {
			if _, err := c.Recv(buf); err != nil {
				return err
			}
		}
		time.Sleep(time.Hour)
	case "record-send": // n records of 0..996 bytes, RINGS_TEST_BATCH at a time
		w, err := recordWriterOf(seg, ring)
		if err != nil {
			return err
		}
		buf := make([]byte, 1000)
		batch := uint64(max(1, envInt("BATCH"))) // > 1: that many between Hold and Flush
		for i := uint64(0); i < uint64(n); i++ {
			if batch > 1 && i%batch == 0 {
				if err := w.Hold(); err != nil {
					return err
				}
			}
			m := buf[:i%997]
			pattern(m, i)
			if err := w.Write(uint32(i%1000), m); err != nil {
				return err
			}
			if i%batch == batch-1 {
				w.Flush()
			}
		}
		return w.Close() // flushes a last, partial batch
	case "mpsc-send": // n records (forever if 0) tagged with id, then an end record
		w, err := recordWriterOf(seg, ring)
		if err != nil {
			return err
		}
		buf := make([]byte, 200)
		for i := uint64(0); n == 0 || i < uint64(n); i++ {
			m := buf[:8+i%150]
			pattern(m, i)
			if err := w.Write(uint32(id), m); err != nil {
				return err
			}
		}
		if err := w.Write(uint32(id), []byte("end")); err != nil {
			return err
		}
		return w.Close()
	case "pingpong": // echo n messages from ring to ring+1
		_, c, err := cellConsumerOf(seg, ring)
		if err != nil {
			return err
		}
		_, p, err := cellProducerOf(seg, ring+1)
		if err != nil {
			return err
		}
		var buf [64]byte
		if err := p.Send(buf[:8]); err != nil { // ready
			return err
		}
		for range n {
			k, err := c.Recv(buf[:])
			if err != nil {
				return err
			}
			if err := p.Send(buf[:k]); err != nil {
				return err
			}
		}
	case "pingpong-record": // echo n records from ring to ring+1
		rd, err := recordReaderOf(seg, ring)
		if err != nil {
			return err
		}
		w, err := recordWriterOf(seg, ring+1)
		if err != nil {
			return err
		}
		if err := w.Write(1, make([]byte, 8)); err != nil { // ready
			return err
		}
		for range n {
			m, err := peekOne(rd)
			if err != nil {
				return err
			}
			err = w.Write(1, m)
			rd.Release(1)
			if err != nil {
				return err
			}
		}
	case "floor": // echo n values of the ping words into the pong words
		mem, err := seg.Region(ring)
		if err != nil {
			return err
		}
		lines := max(1, envInt("LINES"))
		ping, pong, ready := floorWords(mem, lines)
		mask := uint64(lines - 1)
		asm.StoreRelease64(ready, 1)
		for i := uint64(1); i <= uint64(n); i++ {
			off := uintptr(i&mask) * CacheLine
			for asm.LoadAcquire64(word64(ping, off)) != i {
			}
			asm.StoreRelease64(word64(pong, off), i)
		}
	case "tput-cell": // n messages of RINGS_TEST_SIZE bytes in batches
		_, p, err := cellProducerOf(seg, ring)
		if err != nil {
			return err
		}
		return cellProduce(p, n, envInt("SIZE"), envInt("BATCH"))
	case "tput-record": // n records of RINGS_TEST_SIZE bytes, of type ID+1 (type 1 with RINGS_TEST_WORDS)
		w, err := recordWriterOf(seg, ring)
		if err != nil {
			return err
		}
		if batch := envInt("BATCH"); envInt("WORDS") != 0 {
			if err := recordProduceWords(w, n, envInt("SIZE"), envInt("WORK")); err != nil {
				return err
			}
		} else if batch > 1 {
			if err := recordProduceBatch(w, n, envInt("SIZE"), batch); err != nil {
				return err
			}
		} else if err := recordProduce(w, n, envInt("SIZE"), uint32(id)+1); err != nil {
			return err
		}
		return w.Close()
	default:
		return fmt.Errorf("unknown role %q", role)
	}
	return nil
}

// floorWords lays out a raw region of floorSize(lines) bytes for the
// cache-line ping-pong floor: lines lines (a power of two) for each
// direction, the i-th value travelling in the first word of line
// i mod lines, and one line for the child's start signal.
func floorWords(mem []byte, lines int) (ping, pong unsafe.Pointer, ready *uint64) {
	base := unsafeBase(mem)
	return base, unsafe.Add(base, lines*CacheLine), word64(base, uintptr(2*lines*CacheLine))
}

// floorSize returns the bytes floorWords lays out.
func floorSize(lines int) int { return (2*lines + 1) * CacheLine }

// cellProduce sends n messages of size bytes, claiming up to batch cells
// at a time.
func cellProduce(p *CellProducer, n, size, batch int) error {
	msg := make([]byte, size)
	s := newSpinner()
	for sent := 0; sent < n; {
		k := p.Claim(min(batch, n-sent))
		if k == 0 {
			if s.spin() {
				if err := p.Check(); err != nil {
					return err
				}
			}
			continue
		}
		for i := range k {
			binary.LittleEndian.PutUint64(msg, uint64(sent+i))
			copy(p.Slot(i), msg)
			p.Commit(i, size)
		}
		p.Publish(k)
		sent += k
	}
	return nil
}

// recordProduce writes n records of size bytes and type typ, each
// carrying its sequence number in its first eight bytes.
func recordProduce(w *RecordWriter, n, size int, typ uint32) error {
	msg := make([]byte, size)
	for i := range n {
		binary.LittleEndian.PutUint64(msg, uint64(i))
		if err := w.Write(typ, msg); err != nil {
			return err
		}
	}
	return nil
}

// recordProduceWords writes n records of size (16 or more) bytes and
// type 1 the engine's way, with TryWriteWords: the sequence number and a
// word of its work's state, then size-16 bytes; between records it spends work steps
// of a few cycles each, standing for a sender's own work.
func recordProduceWords(w *RecordWriter, n, size, work int) error {
	msg := make([]byte, size-16)
	s := newSpinner()
	x := uint64(1)
	for i := 0; i < n; {
		switch err := w.TryWriteWords(1, uint64(i), x, msg); err {
		case nil:
			i++
			for j := range work {
				x ^= x << 13
				x ^= x >> 7
				x ^= x << 17
				workSink[j&15] = x // a sender's own stores (Go's spills) queue behind the ring's
			}
		case ErrFull:
			if s.spin() {
				if err := w.Check(); err != nil {
					return err
				}
			}
		default:
			return err
		}
	}
	return nil
}

// workSink takes recordProduceWords's work's stores.
var workSink [16]uint64

// recordProduceBatch writes n records of size bytes and type 1, batch at
// a time between Hold and Flush.
func recordProduceBatch(w *RecordWriter, n, size, batch int) error {
	s := newSpinner()
	for i := 0; i < n; {
		if err := w.Hold(); err != nil {
			return err
		}
		for end := min(i+batch, n); i < end; {
			p, err := w.Claim(size)
			if err == ErrFull {
				if s.spin() {
					if err := w.Check(); err != nil {
						return err
					}
				}
				continue
			}
			if err != nil {
				return err
			}
			binary.LittleEndian.PutUint64(p, uint64(i))
			w.Commit(1)
			i++
		}
		w.Flush()
	}
	return nil
}

// child is a re-executed test binary running one role.
type child struct {
	cmd    *exec.Cmd
	stderr bytes.Buffer
	done   chan error
}

// startChild runs role with the given RINGS_TEST_* settings. If seg is a
// memfd segment (unnamed) it is passed as fd 3. The child is killed when
// the test ends.
func startChild(t testing.TB, role string, seg *Segment, env ...string) *child {
	t.Helper()
	c := &child{cmd: testrole.Command(role, nil), done: make(chan error, 1)}

	for i := 0; i+1 < len(env); i += 2 {
		c.cmd.Env = append(c.cmd.Env, "RINGS_TEST_"+env[i]+"="+env[i+1])
	}
	if seg.Name() != "" && seg.path != "" {
		c.cmd.Env = append(c.cmd.Env, "RINGS_TEST_SEG="+seg.Name())
	} else {
		f, err := seg.File()
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		c.cmd.ExtraFiles = []*os.File{f}
	}
	c.cmd.Stderr = &c.stderr
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { c.done <- c.cmd.Wait() }()
	t.Cleanup(func() {
		c.cmd.Process.Kill()
		<-c.done
		c.done <- nil
	})
	return c
}

// wait waits for the child to exit and fails the test if it failed.
func (c *child) wait(t testing.TB) {
	t.Helper()
	select {
	case err := <-c.done:
		c.done <- err
		if err != nil {
			t.Fatalf("child: %v\n%s", err, c.stderr.Bytes())
		}
	case <-time.After(2 * time.Minute):
		t.Fatalf("child did not finish\n%s", c.stderr.Bytes())
	}
}

// watchdog kills the child if the test has not finished after d, so that
// a bug turns into a dead-peer error rather than a hang.
func (c *child) watchdog(t testing.TB, d time.Duration) {
	timer := time.AfterFunc(d, func() {
		t.Errorf("watchdog: killing child after %v", d)
		c.cmd.Process.Kill()
	})
	t.Cleanup(func() { timer.Stop() })
}

// twoCPUs returns two CPUs this process may run on.
func twoCPUs(t testing.TB) (int, int) {
	cpus, err := affinity.Threads()
	if errors.Is(err, affinity.ErrUnsupported) {
		testskip.Skip(t, testskip.NotLinux, "cannot read CPU affinity:", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(cpus) < 2 {
		testskip.Skip(t, testskip.FewCPUs, "needs two CPUs")
	}
	return cpus[0], cpus[1]
}

// pinCurrent pins the calling goroutine's thread to cpu until the
// returned function restores it.
func pinCurrent(t testing.TB, cpu int) func() {
	runtime.LockOSThread()
	restore, err := affinity.Bind(cpu)
	if err != nil {
		runtime.UnlockOSThread()
		if errors.Is(err, affinity.ErrUnsupported) {
			testskip.Skip(t, testskip.NotLinux, "cannot pin:", err)
		}
		t.Fatal("cannot pin:", err)
	}

	return func() {
		restore()
		runtime.UnlockOSThread()
	}
}

// stressCount scales a message count for short and race runs.
func stressCount(n int) int {
	if *stressN > 0 {
		return *stressN
	}
	if testing.Short() {
		n /= 10
	}
	if raceEnabled {
		n /= 10
	}
	return n
}

var _ = errors.Is
