package mpit

import (
	"errors"
	"os"
	"os/exec"
	"testing"

	"github.com/tachyon-hpc/tachyon/mpi"
)

// TestMPILifetime uses the interface before mpi.Init, while MPI runs and
// after mpi.Finalize. MPI initializes once per process, so the test runs
// itself in a child process that does.
func TestMPILifetime(t *testing.T) {
	if os.Getenv("MPIT_TEST_MPI_CHILD") == "" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestMPILifetime$", "-test.v")
		cmd.Env = append(os.Environ(), "MPIT_TEST_MPI_CHILD=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("child: %v\n%s", err, out)
		}
		return
	}
	if err := Init(); err != nil { // before MPI
		t.Fatal(err)
	}
	group := cvarHandle(t, testGroup.Name())
	local := cvarHandle(t, testLocal.Name())
	s, err := NewSession()
	if err != nil {
		t.Fatal(err)
	}
	if err := group.Write(int64(10)); err != nil {
		t.Fatalf("group write before mpi.Init: %v", err)
	}
	if err := mpi.Init(); err != nil {
		t.Fatalf("mpi.Init: %v", err)
	}
	if err := group.Write(int64(11)); !errors.Is(err, ErrCvarSetNotNow) {
		t.Errorf("group write while MPI runs = %v, want ErrCvarSetNotNow", err)
	}
	if v, _ := group.Read(); v != int64(10) {
		t.Errorf("group variable = %v after a refused write, want 10", v)
	}
	if err := local.Write(int64(12)); err != nil {
		t.Errorf("local write while MPI runs: %v", err)
	}
	if err := Init(); err != nil { // a second user, while MPI runs
		t.Fatal(err)
	}
	if err := mpi.Finalize(); err != nil {
		t.Fatalf("mpi.Finalize: %v", err)
	}
	if err := Finalize(); err != nil {
		t.Fatal(err)
	}
	if err := group.Write(int64(13)); err != nil {
		t.Errorf("group write after mpi.Finalize: %v", err)
	}
	if err := s.Free(); err != nil {
		t.Errorf("session made before mpi.Init, freed after mpi.Finalize: %v", err)
	}
	if err := Finalize(); err != nil {
		t.Fatal(err)
	}
}
