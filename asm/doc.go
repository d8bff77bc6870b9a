// Package asm holds the few machine instructions Tachyon needs that Go does
// not expose: reading the time-stamp counter, the spin-wait hint, and
// release stores and acquire loads that cost no more than plain moves.
//
// On amd64 a sync/atomic store compiles to XCHG, a full fence that makes
// every cross-core handoff markedly slower (docs/rings.md, Memory ordering).
// Under x86-TSO a plain MOV already has release semantics, so StoreRelease
// is a single move in assembly; on arm64 it is STLR. Other architectures,
// and any build with the race detector (which cannot see stores made in
// assembly), use sync/atomic instead, so every access stays visible to the
// detector. LoadAcquire is sync/atomic's load everywhere: the compiler
// already makes it a plain move on amd64 and LDAR on arm64, inline, where
// a call into assembly costs three to four times as much.
//
// ReadTSC reads the CPU's cycle counter (RDTSC on amd64, CNTVCT_EL0 on
// arm64); on other architectures it reads the monotonic clock in
// nanoseconds and HasTSC is false.
package asm
