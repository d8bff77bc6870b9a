//go:build linux

package hwtests

import (
	"os"
	"testing"

	"github.com/tachyon-hpc/tachyon/internal/nethost"
)

// roleEnv names what a re-executed test binary does: one task of an srun
// job step, TestShmJobNoRoom's child, TestNICPeer's echo peer or
// TestNICProcessDeath's child.
const roleEnv = "TACHYON_HWTEST_ROLE"

func TestMain(m *testing.M) {
	nethost.EnterMain() // a rank started into a test host (netjob_test.go) enters it first
	switch role := os.Getenv(roleEnv); role {
	case "":
	case "noroom":
		os.Exit(noRoom())
	case "nicecho":
		os.Exit(nicEcho())
	case "nichold":
		os.Exit(nicHold())
	default:
		os.Exit(runRole(role))
	}
	os.Exit(m.Run())
}
