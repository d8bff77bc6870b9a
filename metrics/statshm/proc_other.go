//go:build !linux

package statshm

// selfIdentity returns 0s: without /proc, a file records no start time or
// pid namespace.
func selfIdentity() (start, pidNS uint64) { return 0, 0 }

// gone reports false: without /proc, a reader cannot tell a dead writer
// from a live one, so it never calls a file stale.
func gone(pid int, start, pidNS uint64) bool { return false }
