//go:build linux

package hwtests

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/tachyon-hpc/tachyon/internal/nethost"
	"github.com/tachyon-hpc/tachyon/internal/testrole"
	"github.com/tachyon-hpc/tachyon/internal/testskip"
	"github.com/tachyon-hpc/tachyon/mpi"
	"github.com/tachyon-hpc/tachyon/nic/nictest"
)

// TestEchoAcrossHosts runs examples/echo as two programs started on
// their own on two test hosts (network namespaces joined by a veth pair,
// each with its own /dev/shm): the server on one, clients on the other,
// which find it by its address and talk over the network transport, on
// AF_XDP and on UDP (the clients' nic_mode forced, so that no fallback
// hides a failure). Clients of small and rendezvous-sized requests come
// and go, three at once, one is killed mid-stream, and the server serves
// the next and ends cleanly on SIGTERM.
func TestEchoAcrossHosts(t *testing.T) {
	nw, bin := echoHosts(t)
	for _, mode := range []string{"xdp", "udp"} {
		t.Run(mode, func(t *testing.T) { echoAcross(t, nw, bin, mode) })
	}
}

// echoHosts makes two test hosts, closed with the test, and builds
// examples/echo; it skips where either cannot be had.
func echoHosts(t *testing.T) (*nethost.Network, string) {
	t.Helper()
	if err := nethost.Available(); err != nil {
		testskip.Skip(t, testskip.NoNamespaces, err)
	}
	bin := buildProgram(t, "github.com/tachyon-hpc/tachyon/examples/echo")
	return nictest.Network(t, nethost.Config{MTU: 9000}), bin
}

// buildProgram builds the command pkg into the test's directory and
// returns its path; it skips without a go command.
func buildProgram(t *testing.T, pkg string) string {
	t.Helper()
	gocmd, err := exec.LookPath("go")
	if err != nil {
		testskip.Skip(t, testskip.NoGoCommand, "no go command to build", pkg)
	}
	bin := filepath.Join(t.TempDir(), filepath.Base(pkg))
	if out, err := exec.Command(gocmd, "build", "-o", bin, pkg).CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, out)
	}
	return bin
}

// startServer starts cmd in host h and returns its output's lines and
// its standard error; it is killed when the test ends, if it has not.
func startServer(t *testing.T, h *nethost.Host, cmd *exec.Cmd) (*bufio.Scanner, *testrole.Output) {
	t.Helper()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &testrole.Output{}
	cmd.Stderr = stderr
	if err := h.Start(cmd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() }) // the test waits for it
	return bufio.NewScanner(out), stderr
}

// echoClient returns an examples/echo client in host h of the server at
// addr, with env added to its environment.
func echoClient(t *testing.T, h *nethost.Host, bin, addr string, env []string, args ...string) *exec.Cmd {
	t.Helper()
	cmd, err := h.Command(bin, append([]string{"-connect", addr}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Env = append(cmd.Env, env...)
	return cmd
}

// runEchoClient runs a client of n requests of size bytes and returns
// its output, or an error unless it ended saying all came back.
func runEchoClient(t *testing.T, h *nethost.Host, bin, addr string, env []string, n, size int) (string, error) {
	cmd := echoClient(t, h, bin, addr, env, "-n", fmt.Sprint(n), "-size", fmt.Sprint(size))
	var b testrole.Output
	cmd.Stdout, cmd.Stderr = &b, &b
	if err := h.Start(cmd); err != nil {
		return "", err
	}
	err := cmd.Wait()
	if err == nil && !strings.Contains(b.String(), fmt.Sprintf("echo ok %d", n)) {
		err = fmt.Errorf("no \"echo ok %d\"", n)
	}
	if err != nil {
		return "", fmt.Errorf("client of %d requests of %d bytes: %w\n%s", n, size, err, b.String())
	}
	return strings.TrimSpace(b.String()), nil
}

func echoAcross(t *testing.T, nw *nethost.Network, bin, mode string) {
	env := []string{"TACHYON_NIC_MODE=" + mode, "TACHYON_NIC_FRAME_SIZE=4096"}
	// The server's connections share its interface, whose queue takes one
	// AF_XDP socket: in auto mode the first gets it, the others UDP.
	srvEnv := env
	if mode == "xdp" {
		srvEnv = []string{"TACHYON_NIC_MODE=auto", "TACHYON_NIC_FRAME_SIZE=4096"}
	}
	addr := fmt.Sprintf("%s:7000", nw.Hosts[1].IP)
	srv, err := nw.Hosts[1].Command(bin, "-listen", addr)
	if err != nil {
		t.Fatal(err)
	}
	srv.Env = append(srv.Env, srvEnv...)
	lines, srvErr := startServer(t, nw.Hosts[1], srv)
	if !lines.Scan() || !strings.HasPrefix(lines.Text(), "echo: listening") {
		t.Fatalf("server: %q\n%s", lines.Text(), srvErr.String())
	}
	go func() {
		for lines.Scan() {
		}
	}()
	client := func(env []string, args ...string) *exec.Cmd {
		return echoClient(t, nw.Hosts[0], bin, addr, env, args...)
	}
	runWith := func(env []string, n, size int) {
		out, err := runEchoClient(t, nw.Hosts[0], bin, addr, env, n, size)
		if err != nil {
			t.Errorf("%v\nserver:\n%s", err, srvErr.String())
			return
		}
		t.Logf("%d requests of %d bytes: %s", n, size, out)
	}
	run := func(n, size int) { runWith(env, n, size) }
	run(2000, 64)
	run(200, 100000) // rendezvous: the bulk lane

	// Clients at once, processes of one host: each connection has a link
	// of its own, and an interface queue takes one AF_XDP socket, so in
	// auto mode the first on each host gets it and the others UDP.
	auto := []string{"TACHYON_NIC_MODE=auto", "TACHYON_NIC_FRAME_SIZE=4096", "TACHYON_NIC_REBIND_WAIT=10ms"}
	if mode == "udp" {
		auto = env
	}
	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runWith(auto, 3000, 64)
		}()
	}
	wg.Wait()

	// A client killed mid-stream.
	killed := client(env, "-n", "100000000", "-size", "64")
	if err := nw.Hosts[0].Start(killed); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	killed.Process.Kill()
	killed.Wait()

	run(500, 4096)
	srv.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- srv.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("server: %v\n%s", err, srvErr.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("the server did not end within 20 s of SIGTERM:\n%s", srvErr.String())
	}
	if s := srvErr.String(); strings.Contains(s, "panic") || strings.Contains(s, "fatal") {
		t.Fatalf("server:\n%s", s)
	}
}

// svcServer is the role of TestServerAcrossHostsLeaksNothing's server:
// examples/echo's protocol (requests on tag 1, echoed; goodbye on tag 2)
// on SVC_ADDR, and on its standard input "stats", answered with its live
// connections, open files and goroutines. It closes its session and
// exits 0 when its standard input ends.
func svcServer() int {
	s, err := mpi.NewSession(mpi.WithStandalone(), mpi.WithName("hw-server"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ln, err := s.Listen(os.Getenv("SVC_ADDR"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var live atomic.Int64
	go func() {
		for {
			c, err := ln.Accept(context.Background())
			if err != nil {
				return
			}
			live.Add(1)
			go func() {
				defer live.Add(-1)
				defer c.Disconnect()
				buf := make([]byte, 1<<20)
				for {
					st, err := c.Recv(buf, 0, mpi.AnyTag)
					if err != nil || st.Tag == 2 {
						return
					}
					if c.Send(buf[:st.Count], 0, 1) != nil {
						return
					}
				}
			}()
		}
	}()
	fmt.Println("ready")
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		fds, _ := os.ReadDir("/proc/self/fd")
		fmt.Printf("stats conns=%d fds=%d goroutines=%d\n", live.Load(), len(fds), runtime.NumGoroutine())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.Close(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "Close:", err)
		return 1
	}
	return 0
}

// TestServerAcrossHostsLeaksNothing: a server process of sessions on one
// test host, clients (examples/echo) on another coming and going, at
// once, and killed mid-stream, over AF_XDP and UDP: afterwards the
// server holds no connection, and no more open files (AF_XDP and UDP
// sockets, bulk lane listeners) or goroutines than after its first
// client.
func TestServerAcrossHostsLeaksNothing(t *testing.T) {
	nw, bin := echoHosts(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("%s:7001", nw.Hosts[1].IP)
	env := []string{"TACHYON_NIC_MODE=auto", "TACHYON_NIC_FRAME_SIZE=4096", "TACHYON_NIC_REBIND_WAIT=10ms"}
	srv := exec.Command(exe, testrole.NoTests)
	srv.Env = append(os.Environ(), append(env, testrole.Setting("svcserver"), "SVC_ADDR="+addr)...)
	in, err := srv.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	lines, srvErr := startServer(t, nw.Hosts[1], srv)
	if !lines.Scan() || lines.Text() != "ready" {
		t.Fatalf("server: %q\n%s", lines.Text(), srvErr.String())
	}
	stats := func() (conns, fds, goroutines int) {
		fmt.Fprintln(in, "stats")
		if !lines.Scan() {
			t.Fatalf("server ended:\n%s", srvErr.String())
		}
		if _, err := fmt.Sscanf(lines.Text(), "stats conns=%d fds=%d goroutines=%d", &conns, &fds, &goroutines); err != nil {
			t.Fatalf("%q: %v", lines.Text(), err)
		}
		return
	}
	modeEnv := func(mode string) []string {
		return []string{"TACHYON_NIC_MODE=" + mode, "TACHYON_NIC_FRAME_SIZE=4096", "TACHYON_NIC_REBIND_WAIT=10ms"}
	}
	client := func(mode string, args ...string) *exec.Cmd {
		return echoClient(t, nw.Hosts[0], bin, addr, modeEnv(mode), args...)
	}
	run := func(mode string, n, size int) {
		if _, err := runEchoClient(t, nw.Hosts[0], bin, addr, modeEnv(mode), n, size); err != nil {
			t.Errorf("(%s) %v", mode, err)
		}
	}
	run("xdp", 500, 64)
	waitIdle := func(f0, g0 int) (int, int) {
		deadline := time.Now().Add(20 * time.Second)
		for {
			conns, fds, gs := stats()
			if conns == 0 && (f0 < 0 || fds <= f0) && (g0 < 0 || gs <= g0) {
				return fds, gs
			}
			if time.Now().After(deadline) {
				t.Fatalf("server: %d connections, %d open files (%d before), %d goroutines (%d before)", conns, fds, f0, gs, g0)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	f0, g0 := waitIdle(-1, -1)
	for _, mode := range []string{"xdp", "udp", "auto"} {
		run(mode, 100, 100000) // alone: the queue's AF_XDP socket is free on both hosts
		var wg sync.WaitGroup
		for range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				run(map[string]string{"xdp": "auto", "udp": "udp", "auto": "auto"}[mode], 2000, 64)
			}()
		}
		wg.Wait()
		killed := client(mode, "-n", "100000000", "-size", "4096")
		if err := nw.Hosts[0].Start(killed); err != nil {
			t.Fatal(err)
		}
		time.Sleep(300 * time.Millisecond)
		killed.Process.Kill()
		killed.Wait()
	}
	waitIdle(f0, g0)
	in.Close()
	if err := srv.Wait(); err != nil {
		t.Fatalf("server: %v\n%s", err, srvErr.String())
	}
}
