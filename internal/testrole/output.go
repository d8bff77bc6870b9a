package testrole

import (
	"bytes"
	"sync"
)

// Output collects what processes or goroutines write at once, for a
// test's messages: an io.Writer safe for concurrent use (a role
// process's Stdout and Stderr, ranks' loggers), whose String is all
// written so far, each Write whole.
type Output struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p; it never fails.
func (o *Output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.Write(p)
}

// String returns all written so far.
func (o *Output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.String()
}
