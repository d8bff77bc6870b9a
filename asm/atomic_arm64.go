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

// StoreRelease64PairPrefetchW stores va into *a and then vb into *b, each
// with release semantics, and then, if next is not nil, asks for the line
// at next as PrefetchW does: a producer's record, its position and the
// line it writes next, in the one call that ends its write path (a call
// into assembly makes Go spill and reload every live register, which on a
// ring's write path cost as much as the stores).
//
//go:noescape
func StoreRelease64PairPrefetchW(a *uint64, va uint64, b *uint64, vb uint64, next unsafe.Pointer)

// Fence orders every earlier load and store before every later one (DMB
// ISH). Use it where two threads each store then check the other's flag,
// as a sleeper and its waker do.
//
//go:noescape
func Fence()
