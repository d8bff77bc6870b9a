//go:build !linux

package progress

import "errors"

// pinThread reports that pinning needs Linux.
func pinThread(cpu int) error { return errors.New("CPU pinning needs Linux") }
