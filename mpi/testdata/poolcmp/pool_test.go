// Package poolcmp compares the pool of mpi.RecvMessage's buffers (a
// sync.Pool per power of two, copied here) with
// github.com/valyala/bytebufferpool used as RecvMessage would use it: a
// module of its own under testdata, so that the project does not depend
// on the package it measured and rejected. Run it here:
//
//	go test -bench . -benchtime=200000x -count 3
package poolcmp

import (
	"math/bits"
	"sync"
	"testing"

	"github.com/valyala/bytebufferpool"
)

// tierBuf is mpi's msgBuf without its generation.
type tierBuf struct {
	b     []byte
	class int
}

var tiers [27]sync.Pool

func tierGet(n int) *tierBuf {
	k := 6
	if n > 64 {
		k = bits.Len(uint(n - 1))
	}
	if v := tiers[k].Get(); v != nil {
		return v.(*tierBuf)
	}
	return &tierBuf{b: make([]byte, 1<<k), class: k}
}

func tierPut(p *tierBuf) { tiers[p.class].Put(p) }

// bbpGet is a buffer of n bytes from bytebufferpool: Get, then a new
// array if the one it lent is too small (as append would make).
func bbpGet(n int) *bytebufferpool.ByteBuffer {
	b := bytebufferpool.Get()
	if cap(b.B) < n {
		b.B = make([]byte, n)
	}
	b.B = b.B[:n]
	return b
}

// mix is the size of message i of a service's mix: mostly small, a
// large one now and then.
func mix(i int) int {
	switch {
	case i%20 == 0:
		return 256 << 10
	case i%5 == 0:
		return 16 << 10
	}
	return 256
}

// inFlight is how many messages a receiver holds at once in MixHeld.
const inFlight = 4

// BenchmarkFixed4K: one 4 KiB buffer taken and given back.
func BenchmarkFixed4K(b *testing.B) {
	b.Run("bytebufferpool", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			x := bbpGet(4096)
			x.B[0] = 1
			bytebufferpool.Put(x)
		}
	})
	b.Run("tiered", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			x := tierGet(4096)
			x.b[0] = 1
			tierPut(x)
		}
	})
}

// BenchmarkMixHeld: buffers for the mix, inFlight held at once.
func BenchmarkMixHeld(b *testing.B) {
	b.Run("bytebufferpool", func(b *testing.B) {
		b.ReportAllocs()
		var held [inFlight]*bytebufferpool.ByteBuffer
		for i := range b.N {
			k := i % inFlight
			if held[k] != nil {
				bytebufferpool.Put(held[k])
			}
			held[k] = bbpGet(mix(i))
		}
	})
	b.Run("tiered", func(b *testing.B) {
		b.ReportAllocs()
		var held [inFlight]*tierBuf
		for i := range b.N {
			k := i % inFlight
			if held[k] != nil {
				tierPut(held[k])
			}
			held[k] = tierGet(mix(i))
		}
	})
}

// BenchmarkParallel4K: 4 KiB buffers taken and given back by every core
// at once.
func BenchmarkParallel4K(b *testing.B) {
	b.Run("bytebufferpool", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				bytebufferpool.Put(bbpGet(4096))
			}
		})
	})
	b.Run("tiered", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				tierPut(tierGet(4096))
			}
		})
	})
}
