//go:build !linux

package nic

import (
	"errors"
	"net/netip"
)

// StreamListener takes the streams peers dial to a link's address (Linux
// only).
type StreamListener struct{}

// ListenStream fails with ErrNotLinux.
func ListenStream(ip netip.Addr, backlog int) (*StreamListener, error) { return nil, ErrNotLinux }

// Port returns 0.
func (l *StreamListener) Port() uint16 { return 0 }

// Accept fails with ErrNotLinux.
func (l *StreamListener) Accept() (*Stream, error) { return nil, ErrNotLinux }

// Close fails with ErrClosed.
func (l *StreamListener) Close() error { return ErrClosed }

// Stream is one TCP connection of the bulk lane (Linux only).
type Stream struct{}

// DialStream fails with ErrNotLinux.
func DialStream(to netip.AddrPort) (*Stream, error) { return nil, ErrNotLinux }

// Write fails with ErrNotLinux.
func (s *Stream) Write(bufs ...[]byte) (int, error) { return 0, ErrNotLinux }

// Read fails with ErrNotLinux.
func (s *Stream) Read(b []byte) (int, error) { return 0, ErrNotLinux }

// SetReadLowWater fails with ErrNotLinux.
func (s *Stream) SetReadLowWater(n int) error { return ErrNotLinux }

// Close fails with ErrClosed.
func (s *Stream) Close() error { return ErrClosed }

// ErrStreamLost reports a stream whose peer is gone or was never reached.
var ErrStreamLost = errors.New("nic: stream lost")

// ErrStreamBusy reports a stream the listener could not accept for want of
// descriptors or memory; it waits in the queue for a later Accept.
var ErrStreamBusy = errors.New("nic: stream listener out of resources")
