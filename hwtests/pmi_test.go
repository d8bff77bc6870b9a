//go:build linux

package hwtests

import (
	"fmt"
	"os"
	"strings"

	"github.com/tachyon-hpc/tachyon/pmi"
)

// pmiAllgather is one task of role "pmiallgather": pmi.Allgather of
// values of 700 bytes straight through the launcher's PMI-1 connection
// (no MPI), so that the table travels in chunks of the launcher's
// largest value, every value checked.
func pmiAllgather() int {
	c, err := pmi.FromEnv()
	if err == nil && c == nil {
		err = fmt.Errorf("no PMI launcher (%s and %s are unset)", pmi.EnvFD, pmi.EnvPort)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "pmi.FromEnv:", err)
		return 1
	}
	val := func(r int) string { return fmt.Sprintf("%d-%s", r, strings.Repeat(string(rune('a'+r%26)), 700)) }
	got, err := c.Allgather("hwtest-ag", val(c.Rank()))
	if err != nil {
		fmt.Fprintf(os.Stderr, "rank %d: Allgather: %v\n", c.Rank(), err)
		return 1
	}
	for r := range c.Size() {
		if got[r] != val(r) {
			fmt.Fprintf(os.Stderr, "rank %d: rank %d's value %.40q, want %.40q\n", c.Rank(), r, got[r], val(r))
			return 1
		}
	}
	if err := c.Finalize(); err != nil {
		fmt.Fprintf(os.Stderr, "rank %d: Finalize: %v\n", c.Rank(), err)
		return 1
	}
	fmt.Printf("pmi allgather rank %d of %d ok\n", c.Rank(), c.Size())
	return 0
}
