//go:build amd64 || arm64

package asm

import "unsafe"

// PrefetchW asks the CPU to fetch the cache line at addr for writing
// (PREFETCHW; PRFM PSTL1KEEP), without waiting for it. A producer that
// will soon store into a line another core last read takes ownership
// early, so the store later commits at once instead of holding up the
// stores behind it. It never faults.
//
//go:noescape
func PrefetchW(addr unsafe.Pointer)

// Prefetch asks the CPU to fetch the cache line at addr for reading
// (PREFETCHT0; PRFM PLDL1KEEP), without waiting for it. A reader about to
// walk data that spans two lines another core just wrote asks for the
// second while it waits for the first, so the two transfers overlap. It
// never faults.
//
//go:noescape
func Prefetch(addr unsafe.Pointer)
