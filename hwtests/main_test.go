//go:build linux

package hwtests

import (
	"os"
	"testing"
)

// roleEnv names what a re-executed test binary does: one task of an srun
// job step, TestShmJobNoRoom's child, or TestNICPeer's echo peer.
const roleEnv = "TACHYON_HWTEST_ROLE"

func TestMain(m *testing.M) {
	switch role := os.Getenv(roleEnv); role {
	case "":
	case "noroom":
		os.Exit(noRoom())
	case "nicecho":
		os.Exit(nicEcho())
	default:
		os.Exit(runRole(role))
	}
	os.Exit(m.Run())
}
