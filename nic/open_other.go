//go:build !linux

package nic

// Open fails with ErrNotLinux: AF_XDP is Linux's, and the UDP fallback
// uses Linux's batched socket calls.
func Open(cfg Config) (Link, error) { return nil, ErrNotLinux }

// defaultRoute returns "": only Linux's routing table is read.
func defaultRoute() string { return "" }
