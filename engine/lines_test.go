package engine

import (
	"reflect"
	"testing"
	"unsafe"
)

// TestOwnLines checks that the state a rank writes on the message path
// shares no cache line with whatever lies beside it in memory. In a world
// of goroutine ranks the neighbours are other ranks' objects, written from
// other cores, and a line two cores write moves between them at every
// write: before the padding, the in-process 8 B ping-pong took 0.66-0.69
// µs one way and 4.8-5.1 M msg/s through the facade, against 0.41 µs and
// 9.6-10.4 M msg/s with it (go run ./bench -transport inproc).
func TestOwnLines(t *testing.T) {
	const line = 64
	own := func(name string, size, first, end uintptr) {
		t.Helper()
		if first < line || size-end < line {
			t.Errorf("%s: %d bytes, fields at [%d, %d): want a line of padding before and after", name, size, first, end)
		}
	}
	var ep Endpoint
	own("Endpoint", unsafe.Sizeof(ep), unsafe.Offsetof(ep.lk), unsafe.Offsetof(ep.warmed)+unsafe.Sizeof(ep.warmed))
	var l recordLink
	own("recordLink", unsafe.Sizeof(l), unsafe.Offsetof(l.w), unsafe.Offsetof(l.pad)+unsafe.Sizeof(l.pad))
	// An endpoint's peers are allocated with a spare one on each side,
	// which keeps the others' memory a line away only if a peer is one.
	if n := unsafe.Sizeof(peer{}); n < line {
		t.Errorf("a peer is %d bytes: the spare peers around an endpoint's no longer pad a line", n)
	}
}

// TestReqOpZeroedInLine checks that a request going back to the pool
// leaves no state of its operation behind, and that each part of reqOp
// stays within 176 bytes, a size that Go 1.26 zeroes on amd64 with
// straight-line stores, pointers and all (reqOp whole, 224 bytes, took a
// loop: 8 more instructions on every receive of a message-rate window).
func TestReqOpZeroedInLine(t *testing.T) {
	const inLine = 176
	if n := unsafe.Sizeof(reqMatch{}); n > inLine {
		t.Errorf("reqMatch is %d bytes, over %d: move fields to reqProto", n, inLine)
	}
	if n := unsafe.Sizeof(reqProto{}); n > inLine {
		t.Errorf("reqProto is %d bytes, over %d: split it", n, inLine)
	}
	if n, parts := unsafe.Sizeof(reqOp{}), unsafe.Sizeof(reqMatch{})+unsafe.Sizeof(reqProto{}); n != parts {
		t.Errorf("reqOp is %d bytes, its two parts %d: put zeroes only the parts", n, parts)
	}

	var tab reqTable
	r := &Request{}
	r.id = 1 | 1<<32
	r.Completion.MarkDone()
	r.kind, r.state, r.buf, r.peer, r.tag, r.ctx = kindRecv, stDone, make([]byte, 8), 1, 2, 3
	r.status, r.err, r.qnext, r.list, r.seq = Status{Source: 1, Count: 8}, ErrClosed, r, &reqList{}, 9
	r.snext, r.sent, r.total, r.rreq, r.sid, r.uq = r, 1, 2, 3, 4, &unexpected{}
	r.cancelling, r.freed, r.release = true, true, func() {}
	tab.put(r)
	if v := reflect.ValueOf(r.reqOp); !v.IsZero() {
		for i := range v.NumField() {
			for j := range v.Field(i).NumField() {
				if f := v.Field(i).Field(j); !f.IsZero() {
					t.Errorf("after put, %s is %v", v.Field(i).Type().Field(j).Name, f)
				}
			}
		}
		t.Errorf("after put, the request keeps its operation's state")
	}
	if r.id != 1|2<<32 {
		t.Errorf("after put, id %#x: want generation 2", r.id)
	}
}

// TestRequestIDNeverZero: packets use id 0 for no request, so the table
// never hands out its index 0, and a request's generation may wrap to 0
// without its id becoming 0.
func TestRequestIDNeverZero(t *testing.T) {
	var tab reqTable
	taken := make(map[*Request]bool)
	for range chunkSize - 1 {
		r, ok := tab.get(nil)
		if !ok {
			t.Fatal("the table refused a request")
		}
		if taken[r] {
			t.Fatalf("request %#x handed out twice", r.id)
		}
		taken[r] = true
		if r.id&(1<<32-1) == 0 {
			t.Fatalf("index 0 handed out (id %#x)", r.id)
		}
	}
	if tab.n != 1 {
		t.Fatalf("%d chunks for %d requests", tab.n, chunkSize-1)
	}
	r, _ := tab.get(nil)
	if tab.n != 2 || r.id>>chunkBits&(1<<(32-chunkBits)-1) != 1 {
		t.Fatalf("the %dth request has id %#x from %d chunks: want the second chunk's", chunkSize, r.id, tab.n)
	}
	r.id = r.id&(1<<32-1) | (1<<32-1)<<32 // the last generation
	tab.put(r)
	if r.id == 0 || r.id>>32 != 0 {
		t.Fatalf("after the last generation, id %#x: want generation 0 and a nonzero id", r.id)
	}
	if again, _ := tab.get(nil); again != r {
		t.Fatal("the pool does not hand out the request given back last first")
	}
}
