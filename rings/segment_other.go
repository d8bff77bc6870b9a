//go:build !linux

package rings

import "os"

// CreateSegment needs Linux: it returns ErrUnsupported.
func CreateSegment(name string, size int) (*Segment, error) { return nil, ErrUnsupported }

// CreateMemfdSegment needs Linux: it returns ErrUnsupported.
func CreateMemfdSegment(name string, size int) (*Segment, error) { return nil, ErrUnsupported }

// OpenSegment needs Linux: it returns ErrUnsupported.
func OpenSegment(name string) (*Segment, error) { return nil, ErrUnsupported }

// OpenSegmentFile needs Linux: it returns ErrUnsupported.
func OpenSegmentFile(f *os.File) (*Segment, error) { return nil, ErrUnsupported }

// RemoveStale needs Linux: it returns ErrUnsupported.
func RemoveStale(prefix string) (int, error) { return 0, ErrUnsupported }

// File needs Linux: it returns ErrUnsupported.
func (s *Segment) File() (*os.File, error) { return nil, ErrUnsupported }

// Close needs Linux: it returns ErrUnsupported.
func (s *Segment) Close() error { return ErrUnsupported }

// Remove needs Linux: it returns ErrUnsupported.
func (s *Segment) Remove() error { return ErrUnsupported }

// Prefault reads every cache line of mem (mapping pages ahead needs
// Linux).
func Prefault(mem []byte) error {
	touch(mem)
	return nil
}
