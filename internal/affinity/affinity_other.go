//go:build !linux

package affinity

// Threads fails with ErrUnsupported on this system.
func Threads() ([]int, error) { return nil, ErrUnsupported }

// Bind fails with ErrUnsupported on this system.
func Bind(int) (func(), error) { return nil, ErrUnsupported }
