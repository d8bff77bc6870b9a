package main

import (
	"bufio"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tachyon-hpc/tachyon/internal/testskip"
)

// TestEchoOneHost builds the example and runs it as it is meant to run:
// a server and clients, programs started on their own on one host, that
// find each other by address and talk through shared memory. Clients of
// several sizes come and go, one is killed mid-stream, and the server
// serves the next and ends cleanly on SIGTERM. (hwtests runs the same
// across two test hosts, over the network.)
func TestEchoOneHost(t *testing.T) {
	gocmd, err := exec.LookPath("go")
	if err != nil {
		testskip.Skip(t, testskip.NoGoCommand, "no go command to build the example")
	}
	bin := filepath.Join(t.TempDir(), "echo")
	if out, err := exec.Command(gocmd, "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	srv := exec.Command(bin, "-listen", "127.0.0.1:0")
	out, err := srv.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var srvErr strings.Builder
	srv.Stderr = &srvErr
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer srv.Process.Kill()
	lines := bufio.NewScanner(out)
	if !lines.Scan() {
		t.Fatalf("server: no address\n%s", srvErr.String())
	}
	addr, ok := strings.CutPrefix(lines.Text(), "echo: listening on ")
	if !ok {
		t.Fatalf("server: %q", lines.Text())
	}
	run := func(n, size int) {
		t.Helper()
		b, err := exec.Command(bin, "-connect", addr, "-n", fmt.Sprint(n), "-size", fmt.Sprint(size)).CombinedOutput()
		if err != nil || !strings.Contains(string(b), fmt.Sprintf("echo ok %d\n", n)) {
			t.Fatalf("client of %d requests of %d bytes: %v\n%s\nserver:\n%s", n, size, err, b, srvErr.String())
		}
	}
	run(5000, 64)
	run(300, 200000)
	killed := exec.Command(bin, "-connect", addr, "-n", "100000000", "-size", "4096")
	if err := killed.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	killed.Process.Kill()
	killed.Wait()
	run(1000, 8)
	if b, err := exec.Command(bin, "-connect", addr, "-size", "4").CombinedOutput(); err == nil {
		t.Fatalf("a client of 4-byte requests ran:\n%s", b)
	}
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
}
