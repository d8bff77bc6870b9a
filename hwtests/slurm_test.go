//go:build linux

package hwtests

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tachyon-hpc/tachyon/internal/nethost"
	"github.com/tachyon-hpc/tachyon/internal/testring"
	"github.com/tachyon-hpc/tachyon/internal/testrole"
	"github.com/tachyon-hpc/tachyon/internal/testskip"
	"github.com/tachyon-hpc/tachyon/mpi"
	"github.com/tachyon-hpc/tachyon/nic/nictest"
)

// runRole is one rank of a job the test started under srun.
func runRole(role string) int {
	if role == "clock" {
		if err := startDistortedClock(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	initBegan = time.Now()
	if err := mpi.Init(); err != nil {
		fmt.Fprintln(os.Stderr, "Init:", err)
		return 1
	}
	initEnded = time.Now()
	w := mpi.World()
	me, n := w.Rank(), w.Size()
	var err error
	switch role {
	case "ring":
		err = ring(w)
	case "netjob":
		err = netJob(w)
	case "iface":
		err = ifaceJob(w)
	case "incast":
		err = incastJob(w)
	case "colls":
		err = collJob(w)
	case "netshare":
		err = netShare(w)
	case "scale":
		err = scaleJob(w)
	case "clock":
		err = clockJob(w)
	case "netfail":
		if err = netFail(w); err == nil {
			return 0 // finalized
		}
	case "appnum":
		a, _, _ := w.Attr(mpi.AttrAppNum)
		u, _, _ := w.Attr(mpi.AttrUniverseSize)
		fmt.Printf("rank %d appnum %v universe %v\n", me, a, u)
	case "abort", "abort0":
		if me == 1 {
			mpi.Abort(w, map[string]int{"abort": 7, "abort0": 0}[role])
		}
		_, err = w.Recv(make([]byte, 8), 1, 0) // never sent: the launcher ends the job
	default:
		err = fmt.Errorf("unknown role %q", role)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "rank %d of %d: %v\n", me, n, err)
		return 1
	}
	if err := mpi.Finalize(); err != nil {
		fmt.Fprintf(os.Stderr, "rank %d of %d: Finalize: %v\n", me, n, err)
		return 1
	}
	return 0
}

// ring checks the world against what srun told the task, passes a message
// to the next rank, and says so.
func ring(w *mpi.Comm) error {
	me, n := w.Rank(), w.Size()
	if want := os.Getenv("SLURM_STEP_NUM_TASKS"); strconv.Itoa(n) != want {
		return fmt.Errorf("world of %d, SLURM_STEP_NUM_TASKS=%s", n, want)
	}
	if want := os.Getenv("SLURM_PROCID"); strconv.Itoa(me) != want {
		return fmt.Errorf("rank %d, SLURM_PROCID=%s", me, want)
	}
	if err := testring.Pass(me, n, func(send []byte, dest int, recv []byte, source int) (int, error) {
		st, err := w.Sendrecv(send, dest, testring.Tag, recv, source, testring.Tag)
		return st.Count, err
	}, w.Barrier); err != nil {
		return err
	}
	fmt.Printf("slurm rank %d of %d ok\n", me, n)
	return nil
}

// TestSlurm runs Tachyon jobs under srun on a private one-node cluster:
// jobs of 1, 2 and 4 ranks through the mpi/pmi2 plugin's PMI-1 wire
// protocol, an Abort, pmi.Allgather's chunks of the plugin's largest
// value, the benchmark as the README's main job, and a job
// started without --mpi=pmi2, which must fail with an error that says
// what to do rather than run as several singletons.
func TestSlurm(t *testing.T) {
	c := startSlurm(t)
	for _, n := range []int{1, 2, 4} {
		t.Run(fmt.Sprintf("ring-%d", n), func(t *testing.T) {
			out, code, _ := c.srun(t, "ring", "--mpi=pmi2", "-n", strconv.Itoa(n), os.Args[0])
			if code != 0 {
				t.Fatalf("exit %d:\n%s", code, out)
			}
			for r := 0; r < n; r++ {
				if !strings.Contains(out, fmt.Sprintf("slurm rank %d of %d ok\n", r, n)) {
					t.Fatalf("rank %d did not finish:\n%s", r, out)
				}
			}
		})
	}
	t.Run("abort", func(t *testing.T) {
		out, code, took := c.srun(t, "abort", "--mpi=pmi2", "-n", "3", os.Args[0])
		// srun ends the step's other tasks with SIGKILL and exits with the
		// largest status among them (137), not the Abort code; it names
		// the aborting task's status in its own message.
		if code == 0 {
			t.Fatalf("exit 0 after Abort:\n%s", out)
		}
		if !strings.Contains(out, "task 1: Exited with exit code 7") {
			t.Fatalf("srun did not report task 1's Abort(7):\n%s", out)
		}
		if took > 30*time.Second {
			t.Fatalf("took %v: the other ranks were not ended", took)
		}
	})
	t.Run("abort0", func(t *testing.T) {
		// An abort with code 0 ends the step all the same: the other
		// tasks, blocked in a receive, do not run on.
		out, code, took := c.srun(t, "abort0", "--mpi=pmi2", "-n", "3", os.Args[0])
		if code == 0 || took > 30*time.Second {
			t.Fatalf("exit %d after %v:\n%s", code, took, out)
		}
		if !strings.Contains(out, "Abort(0) called") {
			t.Fatalf("no word of the abort:\n%s", out)
		}
	})
	t.Run("netns-2", func(t *testing.T) {
		// Each task a test host of its own: the job spans hosts, over
		// AF_XDP between the tasks' namespaces.
		nw := nictest.Network(t, nethost.Config{Hosts: 2})
		out, code, _ := c.srunEnv(t, "netjob", []string{nethost.EnterEnvEach(nw.Hosts), "TACHYON_NIC_MODE=xdp"},
			"--mpi=pmi2", "-n", "2", os.Args[0])
		if code != 0 {
			t.Fatalf("exit %d:\n%s", code, out)
		}
		for r, h := range nw.Hosts {
			if !strings.Contains(out, fmt.Sprintf("netjob rank %d of 2 on %s ok", r, h.Name)) {
				t.Fatalf("rank %d did not finish on its host:\n%s", r, out)
			}
		}
	})
	t.Run("pmi-allgather", func(t *testing.T) {
		// The bootstrap's allgather straight over the plugin's PMI-1
		// wire: a table of 5 values of 700 bytes, in 4 chunks of the
		// largest value a command of 1024 bytes carries (the plugin
		// reads no more of one).
		out, code, _ := c.srun(t, "pmiallgather", "--mpi=pmi2", "-n", "5", os.Args[0])
		if code != 0 {
			t.Fatalf("exit %d:\n%s", code, out)
		}
		for r := range 5 {
			if !strings.Contains(out, fmt.Sprintf("pmi allgather rank %d of 5 ok\n", r)) {
				t.Fatalf("rank %d did not finish:\n%s", r, out)
			}
		}
	})
	t.Run("without-pmi", func(t *testing.T) {
		out, code, _ := c.srun(t, "ring", "--mpi=none", "-n", "2", os.Args[0])
		if code == 0 || strings.Contains(out, " ok\n") {
			t.Fatalf("exit %d without a PMI connection:\n%s", code, out)
		}
		if !strings.Contains(out, "srun --mpi=pmi2") {
			t.Fatalf("the error does not say to use --mpi=pmi2:\n%s", out)
		}
	})
	t.Run("bench", func(t *testing.T) {
		gocmd, err := exec.LookPath("go")
		if err != nil {
			testskip.Skip(t, testskip.NoGoCommand, "no go command to build the benchmark")
		}
		bin := filepath.Join(t.TempDir(), "bench")
		build := exec.Command(gocmd, "build", "-o", bin, "github.com/tachyon-hpc/tachyon/bench")
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("go build ./bench: %v\n%s", err, out)
		}
		out, code, _ := c.srun(t, "", "--mpi=pmi2", "-n", "2", bin, "-format", "anchor", "-max", "8", "-quiet")
		if code != 0 {
			t.Fatalf("exit %d:\n%s", code, out)
		}
		for _, kind := range []string{"latency", "msgrate", "bw"} {
			line := ""
			for _, l := range strings.Split(out, "\n") {
				if strings.HasPrefix(l, kind+" 8 ") {
					line = l
				}
			}
			f := strings.Fields(line)
			if len(f) != 3 {
				t.Fatalf("no %q line for 8 B:\n%s", kind, out)
			}
			if v, err := strconv.ParseFloat(f[2], 64); err != nil || v <= 0 {
				t.Fatalf("%q: not a positive figure:\n%s", line, out)
			}
		}
		t.Logf("under srun --mpi=pmi2 -n 2:\n%s", out)
	})
}

// cluster is a private one-node Slurm cluster: its configuration file and
// the environment that points srun at it.
type cluster struct {
	conf string
	env  []string
}

// startSlurm starts munged, slurmctld and slurmd for a cluster of this
// host alone, on free ports, with all their files under a temporary
// directory, and stops them when the test ends. It skips the test where
// that is not possible.
func startSlurm(t *testing.T) *cluster {
	t.Helper()
	if runtime.GOOS != "linux" {
		testskip.Skip(t, testskip.NotLinux, "Slurm tests run on Linux")
	}
	if os.Geteuid() != 0 {
		testskip.Skip(t, testskip.NotRoot, "needs root to run slurmd (CI runs as root)")
	}
	for _, p := range []string{"munged", "slurmctld", "slurmd", "srun", "sinfo"} {
		if _, err := exec.LookPath(p); err != nil {
			testskip.Skipf(t, testskip.NoSlurm, "%s not on PATH (apt-get install slurm-wlm munge)", p)
		}
	}
	dir := t.TempDir()
	for _, d := range []string{"spool", "state"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	key := make([]byte, 1024)
	rand.Read(key)
	if err := os.WriteFile(filepath.Join(dir, "munge.key"), key, 0o400); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "munge.sock")
	start(t, dir, "munged", "--foreground", "--force",
		"--socket="+sock,
		"--key-file="+filepath.Join(dir, "munge.key"),
		"--pid-file="+filepath.Join(dir, "munged.pid"),
		"--seed-file="+filepath.Join(dir, "munged.seed"),
		"--log-file="+filepath.Join(dir, "munged.log"))
	waitFor(t, dir, "munged's socket", func() bool { _, err := os.Stat(sock); return err == nil })

	ports := freePorts(t, 2)
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "slurm.conf")
	text := fmt.Sprintf(`ClusterName=tachyontest
SlurmctldHost=%[1]s(127.0.0.1)
SlurmctldPort=%[2]d
SlurmdPort=%[3]d
AuthType=auth/munge
AuthInfo=socket=%[4]s
CredType=cred/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SlurmUser=root
SlurmdUser=root
SlurmctldPidFile=%[5]s/slurmctld.pid
SlurmdPidFile=%[5]s/slurmd.pid
SlurmdSpoolDir=%[5]s/spool
StateSaveLocation=%[5]s/state
SlurmctldLogFile=%[5]s/slurmctld.log
SlurmdLogFile=%[5]s/slurmd.log
SlurmdParameters=config_overrides
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
NodeName=%[1]s NodeAddr=127.0.0.1 CPUs=%[6]d RealMemory=1 State=UNKNOWN
PartitionName=test Nodes=%[1]s Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
`, host, ports[0], ports[1], sock, dir, runtime.NumCPU())
	if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	c := &cluster{conf: conf, env: append(os.Environ(), "SLURM_CONF="+conf)}
	start(t, dir, "slurmctld", "-D", "-c", "-f", conf)
	start(t, dir, "slurmd", "-D", "-f", conf, "-N", host)
	waitFor(t, dir, "the node to be idle", func() bool {
		cmd := exec.Command("sinfo", "-h", "-N", "-o", "%T")
		cmd.Env = c.env
		out, err := cmd.Output()
		return err == nil && strings.TrimSpace(string(out)) == "idle"
	})
	return c
}

// start runs a daemon in the foreground for the rest of the test.
func start(t *testing.T, dir, name string, args ...string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	log, err := os.Create(filepath.Join(dir, name+".out"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		log.Close()
		t.Fatalf("starting %s: %v", name, err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); log.Close(); close(done) }()
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
	})
}

// waitFor polls ready for up to 30 seconds and fails the test, with the
// daemons' logs, if it never holds.
func waitFor(t *testing.T, dir, what string, ready func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if ready() {
			return
		}
	}
	var logs strings.Builder
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".log") || strings.HasSuffix(e.Name(), ".out") {
			b, _ := os.ReadFile(filepath.Join(dir, e.Name()))
			fmt.Fprintf(&logs, "== %s\n%s\n", e.Name(), b)
		}
	}
	t.Fatalf("waited 30s for %s\n%s", what, logs.String())
}

// freePorts returns n TCP ports that were free a moment ago.
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var ports []int
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports
}

// srun runs one job step on the cluster, the tasks running role (none
// where prog is not this test binary), and returns its output, exit status
// and duration.
func (c *cluster) srun(t *testing.T, role string, args ...string) (string, int, time.Duration) {
	t.Helper()
	return c.srunEnv(t, role, nil, args...)
}

// srunEnv is srun with extra KEY=VALUE entries in the tasks' environment.
func (c *cluster) srunEnv(t *testing.T, role string, env []string, args ...string) (string, int, time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "srun", append([]string{"-N", "1", "--overcommit"}, args...)...)
	cmd.Env = append(append(c.env[:len(c.env):len(c.env)], testrole.Setting(role)), env...)
	if role != "" {
		cmd.Args = append(cmd.Args, testrole.NoTests)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	begin := time.Now()
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("srun still running after 2 minutes:\n%s", out.String())
	}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	return out.String(), cmd.ProcessState.ExitCode(), time.Since(begin)
}
