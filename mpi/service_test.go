package mpi

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tachyon-hpc/tachyon/internal/testrole"
)

// Services as processes started on their own: a server that listens and
// clients that dial it, each a re-executed test binary playing a role,
// connected only by an address.

// serviceRoles are the roles of processes started apart (no launcher).
var serviceRoles = map[string]func() int{
	"svc-server": svcServer,
	"svc-client": svcClient,
}

// Echo protocol tags: a request, echoed; the client's goodbye.
const (
	svcRequest = 1
	svcBye     = 2
)

// svcServer serves echo clients on a port of loopback and answers
// "stats" on its standard input with its live connections, goroutines
// and open files; it closes its session and exits 0 when its standard
// input ends. With SVC_DIE_AFTER=K it exits at once, status 3, after the
// K-th request: a crash.
func svcServer() int {
	s, err := NewSession(WithStandalone(), WithName("svc-server"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ln, err := s.Listen("127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	dieAfter, _ := strconv.Atoi(os.Getenv("SVC_DIE_AFTER"))
	var served atomic.Int64
	fmt.Printf("addr %s\n", ln.Addr())
	go func() {
		for {
			c, err := ln.Accept(context.Background())
			if err != nil {
				return
			}
			go func() {
				defer c.Disconnect()
				buf := make([]byte, 1<<20)
				for {
					st, err := c.Recv(buf, 0, AnyTag)
					if err != nil || st.Tag == svcBye {
						return
					}
					if n := served.Add(1); dieAfter > 0 && n >= int64(dieAfter) {
						os.Exit(3)
					}
					if err := c.Send(buf[:st.Count], 0, svcRequest); err != nil {
						return
					}
				}
			}()
		}
	}()
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		if in.Text() == "stats" {
			s.mu.Lock()
			n := len(s.conns)
			s.mu.Unlock()
			fmt.Printf("stats conns=%d goroutines=%d fds=%d\n", n, runtime.NumGoroutine(), openFiles())
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.Close(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "Close:", err)
		return 1
	}
	return 0
}

// openFiles counts this process's open file descriptors.
func openFiles() int {
	es, _ := os.ReadDir("/proc/self/fd")
	return len(es)
}

// svcClient dials SVC_ADDR and makes SVC_N round trips of mixed sizes,
// checking every reply; with SVC_HANG set it then prints "hanging" and
// waits to be killed, else it says goodbye and exits 0.
func svcClient() int {
	s, err := NewSession(WithStandalone(), WithName("svc-client"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := s.Dial(ctx, os.Getenv("SVC_ADDR"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	n, _ := strconv.Atoi(os.Getenv("SVC_N"))
	if err := echoRounds(c, n); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if os.Getenv("SVC_HANG") != "" {
		fmt.Println("hanging")
		select {}
	}
	if err := c.Send(nil, 0, svcBye); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := s.Close(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "Close:", err)
		return 1
	}
	fmt.Println("client ok")
	return 0
}

// echoSizes are the sizes echoRounds cycles through: short, eager and
// rendezvous messages.
var echoSizes = []int{8, 64, 0, 4096, 8, 100000, 64}

// echoRounds makes n round trips with the echo server at the other end
// of c, checking each reply's size, bytes and order.
func echoRounds(c *Comm, n int) error {
	rep := make([]byte, 1<<17)
	for i := range n {
		size := echoSizes[i%len(echoSizes)]
		req := make([]byte, size)
		for j := range req {
			req[j] = byte(i*7 + j)
		}
		if size >= 8 {
			binary.LittleEndian.PutUint64(req, uint64(i))
		}
		if err := c.Send(req, 0, svcRequest); err != nil {
			return fmt.Errorf("request %d: %w", i, err)
		}
		st, err := c.Recv(rep, 0, svcRequest)
		if err != nil {
			return fmt.Errorf("reply %d: %w", i, err)
		}
		if st.Count != size || !bytes.Equal(rep[:st.Count], req) {
			return fmt.Errorf("reply %d: %d bytes, want %d, equal %v", i, st.Count, size, bytes.Equal(rep[:st.Count], req))
		}
	}
	return nil
}

// svcProcess is a role process with its output read line by line.
type svcProcess struct {
	cmd   *exec.Cmd
	in    io.WriteCloser
	lines chan string
	out   *testrole.Output
}

// startRole starts the test binary as role with env added.
func startRole(t *testing.T, role string, env ...string) *svcProcess {
	t.Helper()
	cmd := testrole.Command(role, env)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &svcProcess{cmd: cmd, in: in, lines: make(chan string, 64), out: &testrole.Output{}}
	cmd.Stderr = p.out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { // ends when the process does
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			fmt.Fprintln(p.out, sc.Text())
			p.lines <- sc.Text()
		}
		close(p.lines)
	}()
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		p.cmd.Wait()
	})
	return p
}

// stop closes the process's standard input and waits for it to exit 0.
func (p *svcProcess) stop(t *testing.T) {
	t.Helper()
	p.in.Close()
	for range p.lines { // its last lines, until it exits
	}
	if err := p.cmd.Wait(); err != nil {
		t.Fatalf("%v\n%s", err, p.out.String())
	}
}

// line waits for the process's next line that starts with prefix.
func (p *svcProcess) line(t *testing.T, prefix string) string {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case l, ok := <-p.lines:
			if !ok {
				t.Fatalf("the process ended before a line %q:\n%s", prefix, p.out.String())
			}
			if strings.HasPrefix(l, prefix) {
				return l
			}
		case <-timeout:
			t.Fatalf("no line %q in 30 s:\n%s", prefix, p.out.String())
		}
	}
}

// serverStats asks the server for its counts.
func (p *svcProcess) stats(t *testing.T) (conns, goroutines, fds int) {
	t.Helper()
	fmt.Fprintln(p.in, "stats")
	l := p.line(t, "stats ")
	if _, err := fmt.Sscanf(l, "stats conns=%d goroutines=%d fds=%d", &conns, &goroutines, &fds); err != nil {
		t.Fatalf("%q: %v", l, err)
	}
	return
}

// TestServiceClientsComeAndGo runs a server process and clients that
// come and go, one killed mid-stream: the server serves each, and ends
// with nothing left of them (connections, goroutines, open files).
func TestServiceClientsComeAndGo(t *testing.T) {
	srv := startRole(t, "svc-server")
	addr := strings.TrimPrefix(srv.line(t, "addr "), "addr ")
	client := func(n int, env ...string) *svcProcess {
		return startRole(t, "svc-client", append([]string{"SVC_ADDR=" + addr, "SVC_N=" + strconv.Itoa(n)}, env...)...)
	}
	first := client(50)
	if err := first.cmd.Wait(); err != nil {
		t.Fatalf("first client: %v\n%s", err, first.out.String())
	}
	_, g0, f0 := waitServerIdle(t, srv, -1, -1)

	var wg sync.WaitGroup
	for i := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := client(700)
			if err := c.cmd.Wait(); err != nil {
				t.Errorf("client %d: %v\n%s", i, err, c.out.String())
			}
		}()
	}
	hung := client(20, "SVC_HANG=1")
	hung.line(t, "hanging")
	hung.cmd.Process.Kill() // mid-stream: its connection is open
	hung.cmd.Wait()
	wg.Wait()
	last := client(200)
	if err := last.cmd.Wait(); err != nil {
		t.Fatalf("client after the killed one: %v\n%s", err, last.out.String())
	}
	waitServerIdle(t, srv, g0, f0)
	srv.stop(t)
}

// waitServerIdle waits until the server holds no connection and, where
// g0 and f0 are not -1, no more goroutines and open files than those.
func waitServerIdle(t *testing.T, srv *svcProcess, g0, f0 int) (conns, goroutines, fds int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		conns, goroutines, fds = srv.stats(t)
		if conns == 0 && (g0 < 0 || goroutines <= g0) && (f0 < 0 || fds <= f0) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("server still holds %d connections, %d goroutines (%d before), %d open files (%d before)", conns, goroutines, g0, fds, f0)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestServiceServerRestarts has this process dial two server processes;
// one crashes: only that connection fails, with ErrProcFailed, and a new
// server is dialed in its place. Nothing is left of the connections once
// disconnected.
func TestServiceServerRestarts(t *testing.T) {
	s := newTestSession(t)
	g0, f0 := runtime.NumGoroutine(), openFiles()
	dial := func(p *svcProcess) *Comm {
		addr := strings.TrimPrefix(p.line(t, "addr "), "addr ")
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c, err := s.Dial(ctx, addr)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	a := startRole(t, "svc-server", "SVC_DIE_AFTER=30")
	other := startRole(t, "svc-server")
	ca, co := dial(a), dial(other)
	if err := echoRounds(ca, 29); err != nil {
		t.Fatal(err)
	}
	// The 30th request kills server a.
	err := echoRounds(ca, 1)
	if !errors.Is(err, ErrProcFailed) {
		t.Fatalf("round trip with a crashed server: %v, want ErrProcFailed", err)
	}
	for range a.lines {
	}
	a.cmd.Wait()
	if err := echoRounds(co, 100); err != nil {
		t.Fatalf("the other server's connection: %v", err)
	}
	if err := ca.Disconnect(); err != nil {
		t.Fatalf("Disconnect of the failed connection: %v", err)
	}
	b := startRole(t, "svc-server")
	cb := dial(b)
	if err := echoRounds(cb, 100); err != nil {
		t.Fatalf("the restarted server: %v", err)
	}
	for _, c := range []*Comm{cb, co} {
		if err := c.Send(nil, 0, svcBye); err != nil {
			t.Fatal(err)
		}
		if err := c.Disconnect(); err != nil {
			t.Fatal(err)
		}
	}
	b.stop(t)
	other.stop(t)
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > g0 || openFiles() > f0 {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			fds, _ := exec.Command("ls", "-l", "/proc/"+strconv.Itoa(os.Getpid())+"/fd").Output()
			t.Fatalf("%d goroutines (%d before), %d open files (%d before)\n%s\n%s", runtime.NumGoroutine(), g0, openFiles(), f0, buf, fds)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := ca.Send(nil, 0, 1); !errors.Is(err, ErrComm) {
		t.Fatalf("Send on a disconnected connection: %v, want ErrComm", err)
	}
}
