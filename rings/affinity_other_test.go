//go:build !linux

package rings

import "errors"

// errNoAffinity: the tests read and set CPU affinity with Linux's
// sched_getaffinity and sched_setaffinity only; the tests that pin skip.
var errNoAffinity = errors.New("CPU affinity in these tests needs Linux")

func threadCPUs() ([]int, error) { return nil, errNoAffinity }

func bindThread(int) (func(), error) { return nil, errNoAffinity }
