package asm

import "sync/atomic"

// LoadAcquire32 loads *addr with acquire semantics: no later load or store
// in program order is performed before it. It is sync/atomic's load, which
// the compiler turns into a plain load on amd64 (an acquire under x86-TSO)
// and a load-acquire on arm64, inline: a call into assembly would cost
// more than the load.
func LoadAcquire32(addr *uint32) uint32 { return atomic.LoadUint32(addr) }

// LoadAcquire64 loads *addr with acquire semantics.
func LoadAcquire64(addr *uint64) uint64 { return atomic.LoadUint64(addr) }
