//go:build linux

package hwtests

import (
	"testing"

	"github.com/tachyon-hpc/tachyon/internal/nethost"
	"github.com/tachyon-hpc/tachyon/internal/testrole"
)

// A re-executed test binary (internal/testrole) plays a role instead of
// running the tests: one task of an srun, mpiexec or tachyonrun job,
// TestShmJobNoRoom's child, TestNICPeer's echo peer,
// TestNICProcessDeath's child, TestServerAcrossHostsLeaksNothing's
// server, TestRealNIC's peer or a task of TestSlurm's PMI allgather.
func TestMain(m *testing.M) {
	nethost.EnterMain() // a rank started into a test host (netjob_test.go) enters it first
	testrole.Main(m, func(role string) int {
		switch role {
		case "noroom":
			return noRoom()
		case "nicecho":
			return nicEcho()
		case "nichold":
			return nicHold()
		case "svcserver":
			return svcServer()
		case "nicpeer":
			return nicPeer()
		case "pmiallgather":
			return pmiAllgather()
		}
		return runRole(role)
	})
}
