//go:build !race

package asm

import "unsafe"

// StoreRelease32 stores v into *addr with release semantics: every load and
// store before it in program order is visible to another CPU before v is.
//
//go:noescape
func StoreRelease32(addr *uint32, v uint32)

// StoreRelease64 stores v into *addr with release semantics.
//
//go:noescape
func StoreRelease64(addr *uint64, v uint64)

// StoreRelease64Pair stores va into *a and then vb into *b, each with
// release semantics: a producer's record and then its position, published
// in one call.
//
//go:noescape
func StoreRelease64Pair(a *uint64, va uint64, b *uint64, vb uint64)

// StoreRelease64PairPrefetchW is StoreRelease64Pair followed, if next is
// not nil, by PrefetchW(next): a producer's record, its position, and the
// request for the line it writes next, in the one call that ends its
// write path, so that nothing of the caller is live across a call.
//
//go:noescape
func StoreRelease64PairPrefetchW(a *uint64, va uint64, b *uint64, vb uint64, next unsafe.Pointer)

// Fence orders every earlier load and store before every later one (DMB
// ISH). Use it where two threads each store then check the other's flag,
// as a sleeper and its waker do.
//
//go:noescape
func Fence()
