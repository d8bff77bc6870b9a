//go:build !linux

package nic

// Open fails with ErrNotLinux: AF_XDP is Linux's, and the UDP fallback
// uses Linux's batched socket calls.
func Open(cfg Config) (Link, error) { return nil, ErrNotLinux }

// DefaultInterface fails with ErrNotLinux.
func DefaultInterface() (string, error) { return "", ErrNotLinux }
