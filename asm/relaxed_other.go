//go:build race || !(amd64 || arm64)

package asm

import "sync/atomic"

// StoreRelaxed32 stores v into *addr as one untorn write that orders
// nothing. This build uses sync/atomic: under the race detector a plain
// store read concurrently is reported, and a 32-bit CPU splits a plain
// 64-bit store in two.
func StoreRelaxed32(addr *uint32, v uint32) { atomic.StoreUint32(addr, v) }

// StoreRelaxed64 stores v into *addr as one untorn write that orders
// nothing (see StoreRelaxed32).
func StoreRelaxed64(addr *uint64, v uint64) { atomic.StoreUint64(addr, v) }

// LoadRelaxed32 loads *addr as one untorn read that orders nothing (see
// StoreRelaxed32).
func LoadRelaxed32(addr *uint32) uint32 { return atomic.LoadUint32(addr) }

// LoadRelaxed64 loads *addr as one untorn read that orders nothing (see
// StoreRelaxed32).
func LoadRelaxed64(addr *uint64) uint64 { return atomic.LoadUint64(addr) }
