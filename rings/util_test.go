package rings

import (
	"encoding/binary"
	"flag"
	"fmt"
	"github.com/tachyon-hpc/tachyon/internal/testrole"
	"os"
	"sync/atomic"
	"testing"
	"unsafe"
)

var nameSeq atomic.Int64

// testName returns a segment name unique to this process and call.
func testName() string {
	return fmt.Sprintf("tachyon-test-%d-%d", os.Getpid(), nameSeq.Add(1))
}

// newTestSegment creates a named segment removed when the test ends.
func newTestSegment(t testing.TB, size int) *Segment {
	t.Helper()
	s, err := CreateSegment(testName(), size)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.Remove()
		s.Close()
	})
	return s
}

// deadPID returns the pid of a process that has exited and been reaped.
func deadPID(t testing.TB) int {
	t.Helper()
	cmd := testrole.Command("exit", nil)

	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return cmd.Process.Pid
}

// fakeSlot makes the slot at off look held by pid.
func fakeSlot(h *header, off uintptr, pid int) {
	atomic.StoreUint64(word64(h.base, off+8), 0)
	atomic.StoreUint64(word64(h.base, off), uint64(1)<<slotGenShift|uint64(pid)|slotReady)
}

// pattern fills p with the bytes message seq carries: seq in the first
// eight bytes (where they fit), then a sequence derived from it.
func pattern(p []byte, seq uint64) {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], seq)
	n := copy(p, b[:])
	for i := n; i < len(p); i++ {
		p[i] = byte(seq) + byte(i)*7
	}
}

// checkPattern reports whether p is what pattern wrote for seq.
func checkPattern(p []byte, seq uint64) bool {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], seq)
	for i := range p {
		want := byte(seq) + byte(i)*7
		if i < 8 {
			want = b[i]
		}
		if p[i] != want {
			return false
		}
	}
	return true
}

// stressN overrides the message counts of the multi-process stress tests.
var stressN = flag.Int("rings.stress", 0, "messages per producer in the multi-process stress tests (0: default, scaled down by -short and -race)")

func unsafeBase(mem []byte) unsafe.Pointer { return unsafe.Pointer(&mem[0]) }
