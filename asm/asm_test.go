package asm_test

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/tachyon-hpc/tachyon/asm"
	"github.com/tachyon-hpc/tachyon/internal/testskip"
)

func TestReadTSCAdvances(t *testing.T) {
	for _, read := range []struct {
		name string
		fn   func() uint64
	}{{"ReadTSC", asm.ReadTSC}, {"ReadTSCOrdered", asm.ReadTSCOrdered}} {
		a := read.fn()
		time.Sleep(2 * time.Millisecond)
		b := read.fn()
		if b <= a {
			t.Errorf("%s did not advance over 2ms: %d then %d", read.name, a, b)
		}
	}
}

// TestReadTSCOrderedAcrossGoroutines checks that a counter value read after
// observing another goroutine's release store is never below the value that
// goroutine read before the store.
func TestReadTSCOrderedAcrossGoroutines(t *testing.T) {
	const rounds = 20000
	var stamp uint64
	var seq uint32
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := uint32(1); i <= rounds; i++ {
			for asm.LoadAcquire32(&seq) != 2*i-1 {
				asm.Pause()
			}
			if now, before := asm.ReadTSCOrdered(), asm.LoadAcquire64(&stamp); now < before {
				t.Errorf("round %d: counter went back across goroutines: %d < %d", i, now, before)
				return
			}
			asm.StoreRelease32(&seq, 2*i)
		}
	}()
	for i := uint32(1); i <= rounds; i++ {
		asm.StoreRelease64(&stamp, asm.ReadTSCOrdered())
		asm.StoreRelease32(&seq, 2*i-1)
		for asm.LoadAcquire32(&seq) != 2*i {
			asm.Pause()
			if t.Failed() {
				return
			}
		}
	}
	<-done
}

// TestReleaseAcquireMessagePassing is the message-passing litmus test: a
// consumer that sees the flag through LoadAcquire must see every store the
// producer made before StoreRelease of the flag.
func TestReleaseAcquireMessagePassing(t *testing.T) {
	const n = 200000
	var data [4]uint64
	var flag32 uint32
	var flag64 uint64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := uint64(1); i <= n; i++ {
			for uint64(asm.LoadAcquire32(&flag32)) != i {
				runtime.Gosched()
			}
			for j := range data {
				if data[j] != i*uint64(j+1) {
					t.Errorf("round %d: data[%d] = %d, want %d", i, j, data[j], i*uint64(j+1))
					return
				}
			}
			asm.StoreRelease64(&flag64, i)
		}
	}()
	for i := uint64(1); i <= n; i++ {
		for j := range data {
			data[j] = i * uint64(j+1)
		}
		asm.StoreRelease32(&flag32, uint32(i))
		for asm.LoadAcquire64(&flag64) != i {
			runtime.Gosched()
			if t.Failed() {
				wg.Wait()
				return
			}
		}
	}
	wg.Wait()
}

// TestStoreReleasePairOrder is the message-passing litmus test for the
// pair: a consumer that sees the second store must see the first and every
// store before the call.
func TestStoreReleasePairOrder(t *testing.T) {
	// With and without a line to prefetch: the prefetch changes nothing
	// stored, and a nil line is skipped.
	var line [64]byte
	for _, next := range []unsafe.Pointer{nil, unsafe.Pointer(&line)} {
		t.Run(fmt.Sprintf("prefetch-%v", next != nil), func(t *testing.T) { testPairOrder(t, next) })
	}
}

func testPairOrder(t *testing.T, next unsafe.Pointer) {
	const n = 100000
	var data, first, second, ack uint64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := uint64(1); i <= n; i++ {
			for asm.LoadAcquire64(&second) != i {
				runtime.Gosched()
			}
			if f, d := asm.LoadAcquire64(&first), data; f != i || d != i {
				t.Errorf("round %d: the second store came before the first (%d) or the data (%d)", i, f, d)
			}
			asm.StoreRelease64(&ack, i)
		}
	}()
	for i := uint64(1); i <= n; i++ {
		data = i
		asm.StoreRelease64PairPrefetchW(&first, i, &second, i, next)
		for asm.LoadAcquire64(&ack) != i {
			runtime.Gosched()
		}
	}
	wg.Wait()
}

func TestStoreLoadValues(t *testing.T) {
	var a uint32
	var b uint64
	for _, v := range []uint32{0, 1, 0x8000_0000, ^uint32(0)} {
		asm.StoreRelease32(&a, v)
		if got := asm.LoadAcquire32(&a); got != v {
			t.Errorf("32-bit round trip of %#x gave %#x", v, got)
		}
	}
	for _, v := range []uint64{0, 1, 1 << 32, 1<<63 | 5, ^uint64(0)} {
		asm.StoreRelease64(&b, v)
		if got := asm.LoadAcquire64(&b); got != v {
			t.Errorf("64-bit round trip of %#x gave %#x", v, got)
		}
	}
	for _, v := range []uint32{0, 1, 0x8000_0000, ^uint32(0)} {
		asm.StoreRelaxed32(&a, v)
		if got := asm.LoadAcquire32(&a); got != v {
			t.Errorf("relaxed 32-bit round trip of %#x gave %#x", v, got)
		}
		if got := asm.LoadRelaxed32(&a); got != v {
			t.Errorf("relaxed 32-bit load of %#x gave %#x", v, got)
		}
	}
	for _, v := range []uint64{0, 1, 1 << 32, 1<<63 | 5, ^uint64(0)} {
		asm.StoreRelaxed64(&b, v)
		if got := asm.LoadAcquire64(&b); got != v {
			t.Errorf("relaxed 64-bit round trip of %#x gave %#x", v, got)
		}
	}
	// The 32-bit store must not touch the neighbouring word.
	var pair [2]uint32
	pair[1] = 0xdeadbeef
	asm.StoreRelease32(&pair[0], 7)
	if pair[1] != 0xdeadbeef {
		t.Errorf("StoreRelease32 clobbered the next word: %#x", pair[1])
	}
}

// TestStoreRelaxedUntorn has one goroutine count with StoreRelaxed64 while
// another samples the word: every value read must be one that was stored
// (both halves from the same count, so no torn write) and no older than
// the last one read.
func TestStoreRelaxedUntorn(t *testing.T) {
	const n = 1 << 20
	var x uint64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := uint64(1); i <= n; i++ {
			asm.StoreRelaxed64(&x, i<<32|i)
		}
	}()
	var last uint64
	for last != n {
		v := asm.LoadAcquire64(&x)
		hi, lo := v>>32, v&(1<<32-1)
		if hi != lo || lo < last || lo > n {
			t.Fatalf("read %#x after count %d", v, last)
		}
		last = lo
	}
	<-done
}

// TestPause: Pause is a hint to the CPU, not a sleep or a yield: a
// million of them return within a second (about 65 cycles each on Zen,
// 140 on Skylake: 25 to 55 ms at 2.6 GHz), so a spin loop that pauses
// stays a spin loop.
func TestPause(t *testing.T) {
	start := time.Now()
	for range 1_000_000 {
		asm.Pause()
	}
	if el := time.Since(start); el > time.Second {
		t.Fatalf("a million Pauses took %v", el)
	}
}

// TestPrefetchNeverFaults: the prefetch hints take any address, mapped
// or not, and change nothing.
func TestPrefetchNeverFaults(t *testing.T) {
	b := []byte{1, 2, 3}
	for _, p := range []unsafe.Pointer{unsafe.Pointer(&b[0]), nil, unsafe.Add(unsafe.Pointer(&b[0]), 1<<20)} {
		asm.Prefetch(p)
		asm.PrefetchW(p)
	}
	if b[0] != 1 || b[2] != 3 {
		t.Fatal("a prefetch changed memory")
	}
}

var sink uint64

func BenchmarkReadTSC(b *testing.B) {
	for i := 0; i < b.N; i++ {
		sink += asm.ReadTSC()
	}
}

func BenchmarkReadTSCOrdered(b *testing.B) {
	for i := 0; i < b.N; i++ {
		sink += asm.ReadTSCOrdered()
	}
}

func BenchmarkTimeNow(b *testing.B) {
	for i := 0; i < b.N; i++ {
		sink += uint64(time.Now().UnixNano())
	}
}

func BenchmarkPause(b *testing.B) {
	for i := 0; i < b.N; i++ {
		asm.Pause()
	}
}

func BenchmarkStoreRelease32(b *testing.B) {
	var x uint32
	for i := 0; i < b.N; i++ {
		asm.StoreRelease32(&x, uint32(i))
	}
}

func BenchmarkStoreRelease64(b *testing.B) {
	var x uint64
	for i := 0; i < b.N; i++ {
		asm.StoreRelease64(&x, uint64(i))
	}
}

func BenchmarkStoreRelaxed64(b *testing.B) {
	var x uint64
	for i := 0; i < b.N; i++ {
		asm.StoreRelaxed64(&x, uint64(i))
	}
}

func BenchmarkAtomicStore64(b *testing.B) {
	var x atomic.Uint64
	for i := 0; i < b.N; i++ {
		x.Store(uint64(i))
	}
}

func BenchmarkLoadAcquire32(b *testing.B) {
	var x uint32 = 3
	var s uint32
	for i := 0; i < b.N; i++ {
		s += asm.LoadAcquire32(&x)
	}
	sink += uint64(s)
}

func BenchmarkLoadAcquire64(b *testing.B) {
	var x uint64 = 3
	for i := 0; i < b.N; i++ {
		sink += asm.LoadAcquire64(&x)
	}
}

// pingPong measures one-way handoff latency between two goroutines locked to
// OS threads, publishing each turn with store. It reports ns per one-way
// handoff, the figure that bounds shared-memory message latency.
func pingPong(b *testing.B, store func(*uint64, uint64)) {
	if runtime.GOMAXPROCS(0) < 2 {
		testskip.Skip(b, testskip.FewCPUs, "needs two Ps for a cross-core ping-pong")
	}
	var line struct {
		_    [64]byte
		ping uint64
		_    [56]byte
		pong uint64
		_    [56]byte
	}
	done := make(chan struct{})
	go func() {
		runtime.LockOSThread()
		defer close(done)
		for i := uint64(1); i <= uint64(b.N); i++ {
			for asm.LoadAcquire64(&line.ping) != i {
			}
			store(&line.pong, i)
		}
	}()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	b.ResetTimer()
	for i := uint64(1); i <= uint64(b.N); i++ {
		store(&line.ping, i)
		for asm.LoadAcquire64(&line.pong) != i {
		}
	}
	b.StopTimer()
	<-done
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(2*b.N), "ns/handoff")
}

func BenchmarkHandoffStoreRelease(b *testing.B) { pingPong(b, asm.StoreRelease64) }

func BenchmarkHandoffAtomicStore(b *testing.B) { pingPong(b, atomic.StoreUint64) }

// TestFenceStoreLoad is the store-buffering litmus test: in each round two
// goroutines start together, store their own flag, fence, and load the
// other's. Without the fence x86 lets each load pass the earlier store, and
// both read the old value in some rounds; with it, at least one must see
// the other's store.
func TestFenceStoreLoad(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		testskip.Skip(t, testskip.FewCPUs, "needs two Ps")
	}
	const rounds = 50000
	var x, y [16]uint32 // flags on their own lines
	var r1, r2 [rounds]uint32
	var start [2][16]uint32
	var wg sync.WaitGroup
	wg.Add(1)
	run := func(me int, mine, other *uint32, out []uint32) {
		for i := uint32(1); i <= rounds; i++ {
			// Two-party barrier: announce round i, wait for the peer.
			asm.StoreRelease32(&start[me][0], i)
			for asm.LoadAcquire32(&start[1-me][0]) < i {
			}
			asm.StoreRelease32(mine, i)
			asm.Fence()
			out[i-1] = asm.LoadAcquire32(other)
		}
	}
	go func() {
		defer wg.Done()
		runtime.LockOSThread()
		run(1, &y[0], &x[0], r2[:])
	}()
	runtime.LockOSThread()
	run(0, &x[0], &y[0], r1[:])
	runtime.UnlockOSThread()
	wg.Wait()
	for i := uint32(1); i <= rounds; i++ {
		if r1[i-1] < i && r2[i-1] < i {
			t.Fatalf("round %d: both goroutines missed the other's store (store-load reordering not fenced)", i)
		}
	}
}

func BenchmarkFence(b *testing.B) {
	for i := 0; i < b.N; i++ {
		asm.Fence()
	}
}
