package nethost

import (
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// A program that another launcher starts (MPICH's Hydra, tachyonrun)
// enters a host through a shim: this program itself, which calls
// EnterMain first thing. Asked to by its environment (Host.EnterEnv), it
// runs in two stages:
//
//  1. In the caller's namespaces, it joins the host's network namespace
//     on one locked thread and starts stage 2 from that thread with
//     CLONE_NEWNS and CLONE_NEWUTS, so that stage 2 has the host's
//     network and mount and UTS namespaces of its own. It passes on
//     PMI_FD, forwards SIGINT and SIGTERM, dies with its parent, and
//     exits as stage 2 does.
//  2. It makes its mounts private, mounts a tmpfs of its own on /dev/shm
//     and sysfs on /sys (which then shows the host's interfaces), sets
//     the host's name, and execs the program its first argument names,
//     or, when there is none or it is a flag, this program again with the
//     same arguments.
//
// So the program runs as on a host of its own: nothing can pass through
// shared memory to another host's ranks by accident.

const (
	envEnter = "TACHYON_NETHOST_ENTER" // stage 1: "<path of the network namespace>,<host name>"
	envStage = "TACHYON_NETHOST_STAGE" // stage 2: "<host name>"
)

// EnterEnv returns the environment entry (KEY=VALUE) that makes
// EnterMain run a program inside h: the namespace is named by this
// process's handle on it, so h must stay open while the program starts.
func (h *Host) EnterEnv() string {
	return fmt.Sprintf("%s=/proc/%d/fd/%d,%s", envEnter, os.Getpid(), int(h.NS), h.Name)
}

// EnterEnvEach returns the environment entry that makes EnterMain run
// each rank of a job inside its own host: rank i (PMI_RANK, else
// SLURM_PROCID) in hosts[i%len(hosts)]. For launchers that give all
// ranks one command and one environment, as srun does.
func EnterEnvEach(hosts []*Host) string {
	specs := make([]string, len(hosts))
	for i, h := range hosts {
		_, specs[i], _ = strings.Cut(h.EnterEnv(), "=")
	}
	return envEnter + "=" + strings.Join(specs, ";")
}

// Command returns a command that runs name with args inside h, by way of
// this program as the shim: this program must call EnterMain before
// anything else.
func (h *Host) Command(name string, args ...string) (*exec.Cmd, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("nethost: finding this program: %w", err)
	}
	cmd := exec.Command(self, append([]string{name}, args...)...)
	cmd.Env = append(os.Environ(), h.EnterEnv())
	return cmd, nil
}

// EnterMain runs the shim's stage its environment asks for and never
// returns; without such a request it returns at once. Call it first in
// main or TestMain. A stage that fails prints why and exits 127.
func EnterMain() {
	if host, ok := os.LookupEnv(envStage); ok {
		exitWith(stage2(host))
	}
	if spec, ok := os.LookupEnv(envEnter); ok {
		code, err := stage1(spec)
		if err != nil {
			exitWith(err)
		}
		os.Exit(code)
	}
}

func exitWith(err error) {
	fmt.Fprintln(os.Stderr, "nethost: entering the host:", err)
	os.Exit(127)
}

// stage1 joins the network namespace and runs stage 2 in new mount and
// UTS namespaces; it returns stage 2's exit status.
func stage1(spec string) (int, error) {
	if specs := strings.Split(spec, ";"); len(specs) > 1 {
		rank := os.Getenv("PMI_RANK")
		if rank == "" {
			rank = os.Getenv("SLURM_PROCID")
		}
		i, err := strconv.Atoi(rank)
		if err != nil || i < 0 {
			return 0, fmt.Errorf("%s lists %d hosts, and neither PMI_RANK nor SLURM_PROCID says which is this rank's", envEnter, len(specs))
		}
		spec = specs[i%len(specs)]
	}
	path, host, ok := strings.Cut(spec, ",")
	if !ok {
		return 0, fmt.Errorf("%s=%q: want <namespace>,<host>", envEnter, spec)
	}
	runtime.LockOSThread() // never unlocked: the thread stays in the host
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, fmt.Errorf("opening %s: %w", path, err)
	}
	err = unix.Setns(fd, unix.CLONE_NEWNET)
	unix.Close(fd)
	if err != nil {
		return 0, fmt.Errorf("joining %s: %w", path, err)
	}
	self, err := os.Executable()
	if err != nil {
		return 0, err
	}
	cmd := exec.Command(self, os.Args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	env := []string{envStage + "=" + host}
	for _, kv := range os.Environ() {
		switch k, v, _ := strings.Cut(kv, "="); k {
		case envEnter:
		case "PMI_FD": // the launcher's connection: the child gets it as fd 3
			n, err := strconv.Atoi(v)
			if err != nil {
				return 0, fmt.Errorf("PMI_FD=%q: %w", v, err)
			}
			cmd.ExtraFiles = append(cmd.ExtraFiles, os.NewFile(uintptr(n), "pmi"))
			env = append(env, "PMI_FD="+strconv.Itoa(2+len(cmd.ExtraFiles)))
		default:
			env = append(env, kv)
		}
	}
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: unix.CLONE_NEWNS | unix.CLONE_NEWUTS, Pdeathsig: syscall.SIGKILL}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	go func() {
		for s := range sigs {
			cmd.Process.Signal(s)
		}
	}()
	err = cmd.Wait()
	if ee, ok := err.(*exec.ExitError); ok {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal()), nil
		}
		return ee.ExitCode(), nil
	}
	return 0, err
}

// stage2 makes the mount namespace the host's and execs the program.
func stage2(host string) error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("making mounts private: %w", err)
	}
	if err := unix.Mount("tmpfs", "/dev/shm", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=1777"); err != nil {
		return fmt.Errorf("mounting a private /dev/shm: %w", err)
	}
	if err := unix.Mount("sysfs", "/sys", "sysfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mounting the host's /sys: %w", err)
	}
	if err := unix.Sethostname([]byte(host)); err != nil {
		return fmt.Errorf("naming the host: %w", err)
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, envStage+"=") {
			env = append(env, kv)
		}
	}
	// The program to run is the first argument, or, when there is none
	// or it is a flag, this program again with the same arguments.
	if len(os.Args) < 2 || strings.HasPrefix(os.Args[1], "-") {
		self, err := os.Executable()
		if err != nil {
			return err
		}
		return syscall.Exec(self, os.Args, env)
	}
	prog, err := exec.LookPath(os.Args[1])
	if err != nil {
		return err
	}
	return syscall.Exec(prog, os.Args[1:], env)
}
