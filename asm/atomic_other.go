//go:build race || !(amd64 || arm64)

package asm

import (
	"sync/atomic"
	"unsafe"
)

// StoreRelease32 stores v into *addr with release semantics: every load and
// store before it in program order is visible to another CPU before v is.
// This build uses sync/atomic (sequentially consistent, so also a release).
func StoreRelease32(addr *uint32, v uint32) { atomic.StoreUint32(addr, v) }

// StoreRelease64 stores v into *addr with release semantics.
func StoreRelease64(addr *uint64, v uint64) { atomic.StoreUint64(addr, v) }

// StoreRelease64PairPrefetchW stores va into *a and then vb into *b, each
// with release semantics, and then, if next is not nil, calls
// PrefetchW(next).
func StoreRelease64PairPrefetchW(a *uint64, va uint64, b *uint64, vb uint64, next unsafe.Pointer) {
	atomic.StoreUint64(a, va)
	atomic.StoreUint64(b, vb)
	if next != nil {
		PrefetchW(next)
	}
}

var fenceWord atomic.Uint32

// Fence orders every earlier load and store before every later one. This
// build uses a sequentially consistent read-modify-write, which the race
// detector also sees as synchronization.
func Fence() { fenceWord.Add(0) }
