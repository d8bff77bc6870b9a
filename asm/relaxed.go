//go:build !race && (amd64 || arm64)

package asm

// StoreRelaxed32 stores v into *addr as one untorn write that orders
// nothing: a value other goroutines sample with LoadAcquire32 and that
// publishes nothing else (a counter, or a flag reset before a release store
// publishes the object it is in). An aligned word store is single-copy
// atomic on these CPUs, so this is a plain store, inlined: it costs what
// the store costs, where a call into assembly costs a few times more.
func StoreRelaxed32(addr *uint32, v uint32) { *addr = v }

// StoreRelaxed64 stores v into *addr as one untorn write that orders
// nothing (see StoreRelaxed32).
func StoreRelaxed64(addr *uint64, v uint64) { *addr = v }

// LoadRelaxed32 loads *addr as one untorn read that orders nothing: a
// flag or counter written with StoreRelaxed32 that guards no other data.
// A plain load, inlined, which the compiler folds into a chain of
// compares around it, where it keeps sync/atomic's load (an intrinsic
// with ordering) apart, as a boolean of its own. Not for a loop that
// waits on the word: the compiler may read it once for the whole loop.
func LoadRelaxed32(addr *uint32) uint32 { return *addr }

// LoadRelaxed64 loads *addr as one untorn read that orders nothing (see
// LoadRelaxed32).
func LoadRelaxed64(addr *uint64) uint64 { return *addr }
