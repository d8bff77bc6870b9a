//go:build !race

package asm

// StoreRelease32 stores v into *addr with release semantics: every load and
// store before it in program order is visible to another CPU before v is.
//
//go:noescape
func StoreRelease32(addr *uint32, v uint32)

// StoreRelease64 stores v into *addr with release semantics.
//
//go:noescape
func StoreRelease64(addr *uint64, v uint64)

// LoadAcquire32 loads *addr with acquire semantics: no later load or store
// in program order is performed before it.
//
//go:noescape
func LoadAcquire32(addr *uint32) uint32

// LoadAcquire64 loads *addr with acquire semantics.
//
//go:noescape
func LoadAcquire64(addr *uint64) uint64

// Fence orders every earlier load and store before every later one (DMB
// ISH). Use it where two threads each store then check the other's flag,
// as a sleeper and its waker do.
//
//go:noescape
func Fence()
