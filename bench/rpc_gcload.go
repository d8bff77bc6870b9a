package main

import (
	"context"
	"runtime/metrics"
	"sync"
	"time"
)

// The garbage collector's load of -gc-load: other goroutines of the
// client and of the server allocating at a steady rate, as the rest of a
// service does around its calls. Each of gcLoadGoroutines goroutines
// allocates, step after step, a 4 KiB buffer (no pointers) and a short
// list of small objects with pointers, and keeps the last of them in a
// ring, so that the heap holds about gcLoadLive bytes alive for the
// collector to mark and the rest becomes garbage: at 1 GB/s that is a
// collection every 30 ms or so with the default GOGC. A goroutine that
// is ahead of its share of the rate sleeps, so the load comes in bursts
// of the timer's granularity (about a millisecond here), between which
// the goroutines under measure run alone.

const (
	gcLoadGoroutines = 4
	gcLoadLive       = 32 << 20         // bytes kept alive, all goroutines together
	gcLoadBuf        = 4 << 10          // each step's buffer
	gcLoadNodes      = 8                // each step's small objects
	gcLoadCheck      = 16               // steps between two looks at the clock
	gcLoadDebt       = time.Millisecond // the most a goroutine catches up on
)

// loadNode is one of a step's small objects.
type loadNode struct {
	next *loadNode
	buf  []byte
	seq  uint64
	_    [3]uint64
}

// loadStep is what one step keeps alive in its goroutine's ring.
type loadStep struct {
	buf   []byte
	nodes *loadNode
}

// stepBytes is about what one step allocates.
const stepBytes = gcLoadBuf + gcLoadNodes*64

// gcLoad is a running load.
type gcLoad struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	start  time.Time
	m0     gcCounts
}

// gcCounts are the process's allocation and collection counters.
type gcCounts struct{ allocs, cycles uint64 }

var gcSamples = []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}, {Name: "/gc/cycles/total:gc-cycles"}}

// readGC reads the counters (whole process, the load's and the rest).
func readGC() gcCounts {
	s := make([]metrics.Sample, len(gcSamples))
	copy(s, gcSamples)
	metrics.Read(s)
	return gcCounts{s[0].Value.Uint64(), s[1].Value.Uint64()}
}

// startGCLoad starts allocating at about rate bytes a second. Its rings
// are filled before it returns, so the heap is at its size from the
// first measured call.
func startGCLoad(rate float64) *gcLoad {
	ctx, cancel := context.WithCancel(context.Background())
	l := &gcLoad{cancel: cancel}
	slots := gcLoadLive / gcLoadGoroutines / stepBytes
	rings := make([][]loadStep, gcLoadGoroutines)
	for g := range rings {
		rings[g] = make([]loadStep, slots)
		for i := range rings[g] {
			rings[g][i] = newLoadStep(uint64(i))
		}
	}
	l.start, l.m0 = time.Now(), readGC()
	for g := range rings {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			allocate(ctx, rings[g], rate/gcLoadGoroutines)
		}()
	}
	return l
}

// allocate runs one goroutine's steps at rate bytes a second until ctx
// ends.
func allocate(ctx context.Context, ring []loadStep, rate float64) {
	start := time.Now()
	var bytes float64
	for i := 0; ctx.Err() == nil; {
		for range gcLoadCheck {
			ring[i%len(ring)] = newLoadStep(uint64(i))
			i++
		}
		bytes += gcLoadCheck * stepBytes
		switch ahead := time.Duration(bytes/rate*1e9) - time.Since(start); {
		case ahead > 0:
			time.Sleep(ahead)
		case ahead < -gcLoadDebt:
			// Behind after a stall: forgo what the stall cost rather
			// than catch up in one long burst.
			start = start.Add(-ahead - gcLoadDebt)
		}
	}
}

// newLoadStep allocates one step.
func newLoadStep(seq uint64) loadStep {
	s := loadStep{buf: make([]byte, gcLoadBuf)}
	s.buf[0] = byte(seq)
	for j := range gcLoadNodes {
		s.nodes = &loadNode{next: s.nodes, buf: s.buf[j:], seq: seq}
	}
	return s
}

// stop ends the load and returns the process's allocation rate in GB/s
// and its collections a second while it ran.
func (l *gcLoad) stop() (gbps, cycles float64) {
	m := readGC()
	d := time.Since(l.start).Seconds()
	l.cancel()
	l.wg.Wait()
	return float64(m.allocs-l.m0.allocs) / d / 1e9, float64(m.cycles-l.m0.cycles) / d
}
