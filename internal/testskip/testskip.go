// Package testskip is the one way this module's tests skip: every skip
// names the expected condition it stands for, a Reason, and CI can refuse
// the skips it does not expect. It is for this module's tests only.
//
// The contract:
//
//   - A test skips only through Skip or Skipf, with a Reason from this
//     package, and only for that specific condition (a missing program,
//     no root, too few CPUs, ...); any other failure to set a test up
//     fails the test.
//   - When the environment variable Env is unset, Skip skips.
//   - When Env is set, it is a comma-separated list of the reasons
//     allowed to skip (it may be empty). Skip with a reason the list does
//     not name fails the test, with a message naming the reason and Env,
//     and does not skip. A name in Env that is no Reason fails every test
//     that tries to skip, so a typo in CI cannot allow everything.
package testskip

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
)

// Env is the environment variable that lists the reasons allowed to skip,
// comma-separated; unset, every reason is.
const Env = "TACHYON_TEST_SKIPS"

// Reason names the expected condition a test skips for.
type Reason string

// The reasons a test may skip for.
const (
	NotRoot        Reason = "not-root"        // needs root (namespaces, BPF, slurmd, mounts, process_vm_readv)
	NotLinux       Reason = "not-linux"       // the feature is Linux only (affinity, pinning, shared-memory segments)
	NotUnix        Reason = "not-unix"        // the feature is Unix only (getrusage)
	NoNamespaces   Reason = "no-namespaces"   // nethost.Available refuses: no network namespaces, veth or bridge here
	NoSharedMemory Reason = "no-shm"          // no shared-memory segments or directory here
	NoBPF          Reason = "no-bpf"          // the kernel refuses to load BPF (EPERM)
	NoXDP          Reason = "no-xdp"          // the kernel has no AF_XDP sockets, or refuses this binding
	NoTSC          Reason = "no-tsc"          // no usable time-stamp counter
	NoMPICH        Reason = "no-mpich"        // MPICH (mpiexec.mpich, mpicc.mpich) is not installed
	NoSlurm        Reason = "no-slurm"        // Slurm or munge is not installed
	NoGoCommand    Reason = "no-go-command"   // no go command to build a program with
	NoAnchors      Reason = "no-anchors"      // TACHYON_NIC_ANCHORS names no built C anchors
	FewCPUs        Reason = "few-cpus"        // needs two CPUs (or two Ps) and has fewer
	RaceDetector   Reason = "race"            // an allocation count, which the race detector's allocations spoil
	Short          Reason = "short"           // too slow for go test -short
	NetForce       Reason = "net-force"       // engine_net_force puts the ranks on the network: a test of rings does not apply
	LossyNetwork   Reason = "lossy-network"   // a test that needs the network transport lossless (nic_drop_rate etc.)
	Launched       Reason = "launched"        // this test process was started by a launcher as a rank
	MPIInitialized Reason = "mpi-initialized" // MPI was initialized earlier in this test process
	Intercepted    Reason = "intercepted"     // a pass-through interceptor runs the whole suite (mpi's MPI_TEST_INTERCEPT): a test of interceptors does not apply
	NoNIC          Reason = "no-nic"          // TACHYON_TEST_NIC names no real NIC to test on (hwtests' TestRealNIC)
)

// Reasons lists every Reason, in the order declared.
var Reasons = []Reason{NotRoot, NotLinux, NotUnix, NoNamespaces, NoSharedMemory, NoBPF, NoXDP, NoTSC,
	NoMPICH, NoSlurm, NoGoCommand, NoAnchors, FewCPUs, RaceDetector, Short, NetForce, LossyNetwork,
	Launched, MPIInitialized, Intercepted, NoNIC}

// Skip skips t for reason, with args formatted as by t.Skip, or fails t
// if Env is set and does not allow reason (see the package doc).
func Skip(t testing.TB, reason Reason, args ...any) {
	t.Helper()
	skip(t, reason, strings.TrimSuffix(fmt.Sprintln(args...), "\n"))
}

// Skipf is Skip with a format, as t.Skipf.
func Skipf(t testing.TB, reason Reason, format string, args ...any) {
	t.Helper()
	skip(t, reason, fmt.Sprintf(format, args...))
}

func skip(t testing.TB, reason Reason, msg string) {
	t.Helper()
	if err := Allowed(reason); err != nil {
		t.Fatalf("unexpected skip (%s): %s\n%v", reason, msg, err)
		return
	}
	t.Skipf("skip (%s): %s", reason, msg)
}

// Allowed returns nil if a test may skip for reason now: reason is one of
// Reasons and Env is unset or lists it. Otherwise its error says why not,
// naming Env.
func Allowed(reason Reason) error {
	if !slices.Contains(Reasons, reason) {
		return fmt.Errorf("testskip: %q is not a skip reason", reason)
	}
	list, set := os.LookupEnv(Env)
	if !set {
		return nil
	}
	var allowed bool
	for _, name := range strings.Split(list, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		if !slices.Contains(Reasons, Reason(name)) {
			return fmt.Errorf("%s=%q names %q, which is not a skip reason", Env, list, name)
		}
		allowed = allowed || Reason(name) == reason
	}
	if !allowed {
		return fmt.Errorf("%s=%q does not allow skip reason %q: fix the cause, or add the reason to %s if this skip is expected here", Env, list, reason, Env)
	}
	return nil
}
