package engine

import (
	"strconv"
	"strings"

	"github.com/tachyon-hpc/tachyon/progress"
)

// oversubscribed is the progress option for a rank whose host runs ranks
// ranks of its job: more ranks than CPUs, and its waits yield at once
// rather than spin (progress.WithOversubscribed).
func oversubscribed(ranks int) progress.Option {
	return progress.WithOversubscribed(ranks > HostCPUs())
}

// countCPUList counts the CPUs of a kernel CPU list ("0-3,6"); def if it
// does not parse.
func countCPUList(s string, def int) int {
	n := 0
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			return def
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return def
			}
		}
		n += b - a + 1
	}
	if n < 1 {
		return def
	}
	return n
}
