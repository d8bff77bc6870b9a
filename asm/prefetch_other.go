//go:build !amd64 && !arm64

package asm

import "unsafe"

// PrefetchW does nothing: this architecture has no prefetch hint
// reachable without assembly.
func PrefetchW(addr unsafe.Pointer) {}

// Prefetch does nothing: this architecture has no prefetch hint reachable
// without assembly.
func Prefetch(addr unsafe.Pointer) {}
