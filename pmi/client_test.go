//go:build unix

package pmi

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tachyon-hpc/tachyon/internal/testrole"
	"github.com/tachyon-hpc/tachyon/internal/testskip"
	"golang.org/x/sys/unix"
)

// The real-launcher tests re-execute the test binary under mpiexec
// (internal/testrole): TestMain then runs the role as one PMI process.
func TestMain(m *testing.M) { testrole.Main(m, runRole) }

func runRole(role string) int {
	c, err := FromEnv()
	if err == nil && c == nil {
		err = errors.New("FromEnv found no PMI launcher")
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "FromEnv:", err)
		return 1
	}
	switch role {
	case "kvs": // every rank publishes a value and reads everyone's
		if err := c.Put(fmt.Sprintf("k%d", c.Rank()), fmt.Sprintf("v%d-of-%d", c.Rank(), c.Size())); err != nil {
			fmt.Fprintln(os.Stderr, "Put:", err)
			return 1
		}
		if err := c.Barrier(); err != nil {
			fmt.Fprintln(os.Stderr, "Barrier:", err)
			return 1
		}
		for r := 0; r < c.Size(); r++ {
			v, err := c.Get(fmt.Sprintf("k%d", r))
			if want := fmt.Sprintf("v%d-of-%d", r, c.Size()); err != nil || v != want {
				fmt.Fprintf(os.Stderr, "Get k%d = %q, %v; want %q\n", r, v, err, want)
				return 1
			}
		}
		if _, err := c.Get("nobody-put-this"); !errors.Is(err, ErrNotFound) {
			fmt.Fprintln(os.Stderr, "Get of a missing key:", err)
			return 1
		}
		if err := c.Barrier(); err != nil {
			fmt.Fprintln(os.Stderr, "Barrier:", err)
			return 1
		}
		if err := c.Finalize(); err != nil {
			fmt.Fprintln(os.Stderr, "Finalize:", err)
			return 1
		}
		fmt.Printf("ok rank %d of %d kvs %s\n", c.Rank(), c.Size(), c.KVSName())
		return 0
	case "allgather": // every rank gathers every rank's value of 700 bytes, a table of chunks of MaxValue bytes
		val := func(r int) string { return fmt.Sprintf("%d-%s", r, strings.Repeat(string(rune('a'+r%26)), 700)) }
		got, err := c.Allgather("test-ag", val(c.Rank()))
		if err != nil {
			fmt.Fprintln(os.Stderr, "Allgather:", err)
			return 1
		}
		for r := range c.Size() {
			if got[r] != val(r) {
				fmt.Fprintf(os.Stderr, "rank %d's value %.40q, want %.40q\n", r, got[r], val(r))
				return 1
			}
		}
		if err := c.Finalize(); err != nil {
			fmt.Fprintln(os.Stderr, "Finalize:", err)
			return 1
		}
		fmt.Printf("ok rank %d of %d allgather, %d gets\n", c.Rank(), c.Size(), c.gets.Load())
		return 0
	case "abort": // rank 1 aborts the job with 7; the others wait
		if c.Rank() == 1 {
			if err := c.Abort(7, "rank 1 gives up"); err != nil {
				fmt.Fprintln(os.Stderr, "Abort:", err)
				return 1
			}
			os.Exit(7)
		}
		time.Sleep(time.Minute)
		return 0
	}
	fmt.Fprintln(os.Stderr, "unknown role", role)
	return 2
}

// socketPair returns the two ends of a connected stream socket pair.
func socketPair(t *testing.T) (client, server net.Conn) {
	t.Helper()
	fds, err := socketpairFDs()
	if err != nil {
		t.Fatal(err)
	}
	conns := make([]net.Conn, 2)
	for i, fd := range fds {
		f := os.NewFile(uintptr(fd), "socketpair")
		conns[i], err = net.FileConn(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { conns[0].Close(); conns[1].Close() })
	return conns[0], conns[1]
}

// step is one exchange of a scripted server: the line it expects (no
// check if empty) and the reply it sends ("" sends nothing; noNewline
// sends reply without its newline).
type step struct {
	expect, reply string
	noNewline     bool
}

// handshake is what Hydra answers to the client's handshake.
var handshake = []step{
	{"cmd=init pmi_version=1 pmi_subversion=1", "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0", false},
	{"cmd=get_maxes", "cmd=maxes kvsname_max=256 keylen_max=64 vallen_max=1024", false},
	{"cmd=get_my_kvsname", "cmd=my_kvsname kvsname=kvs_42_0", false},
}

// serve runs script on conn in a goroutine; the returned function waits for
// it and returns the lines it received and the first mismatch.
func serve(conn net.Conn, script []step) func() ([]string, error) {
	var got []string
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		rd := bufio.NewReader(conn)
		for _, s := range script {
			line, e := rd.ReadString('\n')
			if e != nil {
				err = fmt.Errorf("server reading (want %q): %w", s.expect, e)
				return
			}
			line = strings.TrimSuffix(line, "\n")
			got = append(got, line)
			if s.expect != "" && line != s.expect {
				err = fmt.Errorf("server got %q, want %q", line, s.expect)
				return
			}
			if s.reply != "" {
				r := s.reply
				if !s.noNewline {
					r += "\n"
				}
				if _, e := io.WriteString(conn, r); e != nil {
					err = e
					return
				}
			}
		}
	}()
	return func() ([]string, error) {
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			return got, errors.New("server still running after 10s")
		}
		return got, err
	}
}

func newTestClient(t *testing.T, script ...step) (*Client, net.Conn, func() ([]string, error)) {
	t.Helper()
	cc, sc := socketPair(t)
	wait := serve(sc, append(append([]step{}, handshake...), script...))
	c, err := newClient(cc, 1, 4)
	if err != nil {
		t.Fatal(err)
	}
	return c, sc, wait
}

func TestHandshakeAndCommands(t *testing.T) {
	c, _, wait := newTestClient(t,
		step{"cmd=put kvsname=kvs_42_0 key=card-1 value=tachyon-pmi-7", "cmd=put_result rc=0 msg=success", false},
		step{"cmd=barrier_in", "cmd=barrier_out", false},
		step{"cmd=get kvsname=kvs_42_0 key=card-0", "cmd=get_result rc=0 msg=success value=seg-0", false},
		step{"cmd=get kvsname=kvs_42_0 key=nokey", "cmd=get_result rc=-1 msg=key_nokey_not_found value=unknown", false},
		step{"cmd=put kvsname=kvs_42_0 key=empty value=", "cmd=put_result rc=0", false},
		step{"cmd=get kvsname=kvs_42_0 key=empty", "cmd=get_result rc=0 value=", false},
		step{"cmd=get_appnum", "cmd=appnum appnum=2", false},
		step{"cmd=get_universe_size", "cmd=universe_size size=8", false},
		step{"cmd=finalize", "cmd=finalize_ack", false},
	)
	if c.Rank() != 1 || c.Size() != 4 || c.KVSName() != "kvs_42_0" {
		t.Fatalf("rank %d size %d kvs %q", c.Rank(), c.Size(), c.KVSName())
	}
	if c.keyMax != 64 || c.valMax != 1024 || c.kvsMax != 256 {
		t.Fatalf("maxes %d %d %d", c.kvsMax, c.keyMax, c.valMax)
	}
	if err := c.Put("card-1", "tachyon-pmi-7"); err != nil {
		t.Fatal(err)
	}
	if err := c.Barrier(); err != nil {
		t.Fatal(err)
	}
	if v, err := c.Get("card-0"); err != nil || v != "seg-0" {
		t.Fatalf("Get = %q, %v", v, err)
	}
	if _, err := c.Get("nokey"); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "key_nokey_not_found") {
		t.Fatalf("Get of a missing key: %v", err)
	}
	if err := c.Put("empty", ""); err != nil {
		t.Fatal(err)
	}
	if v, err := c.Get("empty"); err != nil || v != "" {
		t.Fatalf("Get empty = %q, %v", v, err)
	}
	if n, err := c.AppNum(); err != nil || n != 2 {
		t.Fatalf("AppNum = %d, %v", n, err)
	}
	if n, err := c.UniverseSize(); err != nil || n != 8 {
		t.Fatalf("UniverseSize = %d, %v", n, err)
	}
	if err := c.Finalize(); err != nil {
		t.Fatal(err)
	}
	if _, err := wait(); err != nil {
		t.Fatal(err)
	}
	for name, f := range map[string]func() error{
		"Put":      func() error { return c.Put("a", "b") },
		"Get":      func() error { _, err := c.Get("a"); return err },
		"Barrier":  c.Barrier,
		"Finalize": c.Finalize,
		"Abort":    func() error { return c.Abort(1, "") },
	} {
		if err := f(); !errors.Is(err, ErrClosed) {
			t.Errorf("%s after Finalize: %v, want ErrClosed", name, err)
		}
	}
}

func TestAbort(t *testing.T) {
	c, sc, wait := newTestClient(t, step{"cmd=abort exitcode=7 message=rank_1:_bad___thing_", "", false})
	if err := c.Abort(7, "rank 1: bad = thing\n"); err != nil {
		t.Fatal(err)
	}
	if _, err := wait(); err != nil {
		t.Fatal(err)
	}
	if err := c.Put("a", "b"); !errors.Is(err, ErrClosed) {
		t.Fatalf("Put after Abort: %v", err)
	}
	if err := c.Abort(7, ""); !errors.Is(err, ErrClosed) {
		t.Fatalf("second Abort: %v", err)
	}
	// Nothing else was sent.
	sc.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if n, _ := sc.Read(make([]byte, 1)); n != 0 {
		t.Fatal("client sent more after abort")
	}
}

func TestAbortLongMessageAndNoMessage(t *testing.T) {
	long := strings.Repeat("x", 2000)
	c, _, wait := newTestClient(t, step{"cmd=abort exitcode=3 message=" + long[:maxAbort], "", false})
	if err := c.Abort(3, long); err != nil {
		t.Fatal(err)
	}
	if _, err := wait(); err != nil {
		t.Fatal(err)
	}
	c, _, wait = newTestClient(t, step{"cmd=abort exitcode=0", "", false})
	if err := c.Abort(0, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := wait(); err != nil {
		t.Fatal(err)
	}
}

// TestAbortDuringBarrier: Abort does not wait for a command in progress.
func TestAbortDuringBarrier(t *testing.T) {
	c, _, wait := newTestClient(t, step{"cmd=barrier_in", "", false}, step{"cmd=abort exitcode=5 message=stuck", "", false})
	errc := make(chan error, 1)
	go func() { errc <- c.Barrier() }()
	time.Sleep(50 * time.Millisecond)
	aborted := make(chan error, 1)
	go func() { aborted <- c.Abort(5, "stuck") }()
	select {
	case err := <-aborted:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Abort waited for the barrier")
	}
	if _, err := wait(); err != nil {
		t.Fatal(err)
	}
	c.conn.Close()
	if err := <-errc; err == nil {
		t.Fatal("barrier on a closed connection succeeded")
	}
}

func TestBadReplies(t *testing.T) {
	init := handshake[0].expect
	maxes := handshake[1].expect
	kvs := handshake[2].expect
	ok0, ok1 := handshake[0].reply, handshake[1].reply
	cases := []struct {
		name   string
		script []step
		want   error
		text   string
	}{
		{"garbage", []step{{init, "garbage", false}}, ErrProtocol, "not key=value"},
		{"empty line", []step{{init, " ", false}}, ErrProtocol, "does not start with cmd=NAME"},
		{"no cmd", []step{{init, "rc=0 cmd=response_to_init", false}}, ErrProtocol, "does not start with cmd=NAME"},
		{"empty key", []step{{init, "cmd=response_to_init =0", false}}, ErrProtocol, "not key=value"},
		{"wrong cmd", []step{{init, "cmd=maxes rc=0", false}}, ErrProtocol, "want cmd=response_to_init"},
		{"version refused", []step{{init, "cmd=response_to_init rc=-1 pmi_version=2 pmi_subversion=0", false}}, ErrRefused, "offers 2.0"},
		{"no rc", []step{{init, "cmd=response_to_init pmi_version=1 pmi_subversion=1", false}}, ErrRefused, ""},
		{"eof", []step{{init, "", false}}, io.ErrUnexpectedEOF, "reply to init"},
		{"eof mid-line", []step{{init, "cmd=response_to_in", true}}, io.ErrUnexpectedEOF, ""},
		{"long line", []step{{init, "cmd=response_to_init rc=0 x=" + strings.Repeat("y", maxLine), false}}, ErrProtocol, "longer than"},
		{"maxes missing", []step{{init, ok0, false}, {maxes, "cmd=maxes kvsname_max=256 vallen_max=1024", false}}, ErrProtocol, "without keylen_max"},
		{"maxes not int", []step{{init, ok0, false}, {maxes, "cmd=maxes kvsname_max=256 keylen_max=64 vallen_max=lots", false}}, ErrProtocol, "not an integer"},
		{"maxes zero", []step{{init, ok0, false}, {maxes, "cmd=maxes kvsname_max=256 keylen_max=0 vallen_max=10", false}}, ErrProtocol, "keylen_max=0"},
		{"no kvsname", []step{{init, ok0, false}, {maxes, ok1, false}, {kvs, "cmd=my_kvsname", false}}, ErrProtocol, "usable kvsname"},
		{"bad kvsname", []step{{init, ok0, false}, {maxes, ok1, false}, {kvs, "cmd=my_kvsname kvsname=", false}}, ErrProtocol, "usable kvsname"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cc, sc := socketPair(t)
			wait := serve(sc, tc.script)
			go func() { wait(); sc.Close() }() // EOF after the script
			c, err := newClient(cc, 0, 1)
			if c != nil || !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.text) {
				t.Fatalf("newClient = %v, %v; want %v containing %q", c, err, tc.want, tc.text)
			}
		})
	}
}

func TestBadCommandReplies(t *testing.T) {
	const put = "cmd=put kvsname=kvs_42_0 key=k value=v"
	const get = "cmd=get kvsname=kvs_42_0 key=k"
	cases := []struct {
		name  string
		reply string
		op    func(*Client) error
		want  error
		text  string
	}{
		{"put refused", "cmd=put_result rc=-1 msg=duplicate_key", func(c *Client) error { return c.Put("k", "v") }, ErrRefused, "duplicate_key"},
		{"put no rc", "cmd=put_result msg=success", func(c *Client) error { return c.Put("k", "v") }, ErrProtocol, "without rc"},
		{"put wrong cmd", "cmd=get_result rc=0", func(c *Client) error { return c.Put("k", "v") }, ErrProtocol, "want cmd=put_result"},
		{"get rc not int", "cmd=get_result rc=zero value=x", func(c *Client) error { _, err := c.Get("k"); return err }, ErrProtocol, "not an integer"},
		{"get no value", "cmd=get_result rc=0", func(c *Client) error { _, err := c.Get("k"); return err }, ErrProtocol, "no value"},
		{"barrier rc", "cmd=barrier_out rc=1 msg=no", func(c *Client) error { return c.Barrier() }, ErrRefused, "rc=1"},
		{"barrier wrong", "cmd=barrier_in", func(c *Client) error { return c.Barrier() }, ErrProtocol, "want cmd=barrier_out"},
		{"finalize wrong", "cmd=finalize", func(c *Client) error { return c.Finalize() }, ErrProtocol, "want cmd=finalize_ack"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			expect := ""
			switch {
			case strings.HasPrefix(tc.name, "put"):
				expect = put
			case strings.HasPrefix(tc.name, "get"):
				expect = get
			}
			c, _, wait := newTestClient(t, step{expect, tc.reply, false})
			err := tc.op(c)
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.text) {
				t.Fatalf("got %v; want %v containing %q", err, tc.want, tc.text)
			}
			if _, err := wait(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestBadKeysAndValues(t *testing.T) {
	c, sc, wait := newTestClient(t)
	if _, err := wait(); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"", "a b", "a=b", "a\nb", "é", strings.Repeat("k", 64)} {
		if err := c.Put(key, "v"); !errors.Is(err, ErrInvalid) {
			t.Errorf("Put(%q): %v", key, err)
		}
		if _, err := c.Get(key); !errors.Is(err, ErrInvalid) {
			t.Errorf("Get(%q): %v", key, err)
		}
	}
	// The longest value under k: 1024 bytes of command with its newline.
	long := strings.Repeat("v", 1024-len("cmd=put kvsname=kvs_42_0 key=k value=\n"))
	if got := c.MaxValue("k"); got != len(long) {
		t.Errorf("MaxValue(k) = %d, want %d", got, len(long))
	}
	for _, v := range []string{"a b", "a=b", "a\n", "\x00", strings.Repeat("v", 1024), long + "v"} {
		if err := c.Put("k", v); !errors.Is(err, ErrInvalid) {
			t.Errorf("Put(k, %q): %v", v, err)
		}
	}
	// None of them reached the server.
	sc.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if n, _ := sc.Read(make([]byte, 1)); n != 0 {
		t.Fatal("an invalid command was sent")
	}
}

func TestInitTimeout(t *testing.T) {
	old := initTimeout
	initTimeout = 200 * time.Millisecond
	defer func() { initTimeout = old }()
	cc, _ := socketPair(t)
	start := time.Now()
	_, err := newClient(cc, 0, 1)
	if err == nil || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("newClient to a silent server: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("took %v", d)
	}
}

func TestConcurrentCommands(t *testing.T) {
	// A server that answers puts in order; the client must not mix lines.
	const n = 50
	var script []step
	for range n {
		script = append(script, step{"", "cmd=put_result rc=0", false})
	}
	c, _, wait := newTestClient(t, script...)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := c.Put(fmt.Sprintf("key%d", i), strings.Repeat("v", 500)); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	got, err := wait()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range got[len(handshake):] {
		if !strings.HasPrefix(l, "cmd=put kvsname=kvs_42_0 key=key") || !strings.HasSuffix(l, strings.Repeat("v", 500)) {
			t.Fatalf("mixed line %q", l)
		}
	}
}

func clearPMIEnv(t *testing.T) {
	for _, k := range []string{EnvFD, EnvPort, EnvID, EnvRank, EnvSize} {
		t.Setenv(k, "")
	}
}

func TestFromEnvNone(t *testing.T) {
	clearPMIEnv(t)
	c, err := FromEnv()
	if c != nil || err != nil {
		t.Fatalf("FromEnv without PMI variables = %v, %v", c, err)
	}
}

func TestFromEnvFD(t *testing.T) {
	clearPMIEnv(t)
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fds[0])
	f := os.NewFile(uintptr(fds[1]), "server")
	sc, err := net.FileConn(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	wait := serve(sc, append(append([]step{}, handshake...), step{"cmd=finalize", "cmd=finalize_ack", false}))
	t.Setenv(EnvFD, strconv.Itoa(fds[0]))
	t.Setenv(EnvRank, "2")
	t.Setenv(EnvSize, "3")
	c, err := FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if c.Rank() != 2 || c.Size() != 3 || c.KVSName() != "kvs_42_0" {
		t.Fatalf("rank %d size %d kvs %q", c.Rank(), c.Size(), c.KVSName())
	}
	if flags, err := unix.FcntlInt(uintptr(fds[0]), unix.F_GETFD, 0); err != nil || flags&unix.FD_CLOEXEC == 0 {
		t.Fatalf("launcher's descriptor not close-on-exec: %x %v", flags, err)
	}
	if err := c.Finalize(); err != nil {
		t.Fatal(err)
	}
	if _, err := wait(); err != nil {
		t.Fatal(err)
	}
}

func TestFromEnvErrors(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedPort := ln.Addr().String()
	ln.Close()
	cases := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"fd not a number", map[string]string{EnvFD: "six", EnvRank: "0", EnvSize: "1"}, "not a descriptor number"},
		{"fd negative", map[string]string{EnvFD: "-1", EnvRank: "0", EnvSize: "1"}, "not a descriptor number"},
		{"fd not open", map[string]string{EnvFD: "987654", EnvRank: "0", EnvSize: "1"}, "bad file descriptor"},
		{"fd a pipe", map[string]string{EnvFD: strconv.Itoa(int(r.Fd())), EnvRank: "0", EnvSize: "1"}, "not a usable socket"},
		{"no rank", map[string]string{EnvFD: "SOCK", EnvSize: "2"}, "do not give a rank and a size"},
		{"rank too big", map[string]string{EnvFD: "SOCK", EnvRank: "2", EnvSize: "2"}, "do not give a rank and a size"},
		{"port refused", map[string]string{EnvPort: closedPort, EnvRank: "0", EnvSize: "1"}, "connection refused"},
		{"port garbage", map[string]string{EnvPort: "no-port-here", EnvRank: "0", EnvSize: "1"}, "connecting to PMI_PORT"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clearPMIEnv(t)
			for k, v := range tc.env {
				if v == "SOCK" {
					cc, _ := socketPair(t)
					f, err := cc.(*net.UnixConn).File()
					if err != nil {
						t.Fatal(err)
					}
					defer f.Close()
					v = strconv.Itoa(int(f.Fd()))
				}
				t.Setenv(k, v)
			}
			c, err := FromEnv()
			if c != nil || err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("FromEnv = %v, %v; want an error containing %q", c, err, tc.want)
			}
		})
	}
	// The pipe is still open: FromEnv did not close what it could not use.
	if _, err := w.Write([]byte("x")); err != nil {
		t.Fatalf("pipe closed by FromEnv: %v", err)
	}
}

// TestFromEnvPort: the PMI_PORT model with the initack handshake that
// gives the rank and size.
func TestFromEnvPort(t *testing.T) {
	for _, tc := range []struct {
		name string
		sets []string
		err  string
	}{
		{"ok", []string{"cmd=set size=4", "cmd=set rank=3", "cmd=set debug=0"}, ""},
		{"other order", []string{"cmd=set debug=0", "cmd=set rank=3", "cmd=set size=4"}, ""},
		{"no rank", []string{"cmd=set size=4", "cmd=set debug=0", "cmd=set debug=0"}, "did not give a rank"},
		{"two keys", []string{"cmd=set size=4 rank=3", "cmd=set debug=0", "cmd=set debug=0"}, "want cmd=set KEY=N"},
		{"bad value", []string{"cmd=set size=four", "cmd=set rank=3", "cmd=set debug=0"}, "not an integer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clearPMIEnv(t)
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			done := make(chan error, 1)
			go func() {
				sc, err := ln.Accept()
				if err != nil {
					done <- err
					return
				}
				defer sc.Close()
				script := []step{{"cmd=initack pmiid=3", "cmd=initack\n" + strings.Join(tc.sets, "\n"), false}}
				if tc.err == "" {
					script = append(script, handshake...)
				}
				_, err = serve(sc, script)()
				done <- err
			}()
			t.Setenv(EnvPort, ln.Addr().String())
			t.Setenv(EnvID, "3")
			c, err := FromEnv()
			if tc.err != "" {
				if c != nil || err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("FromEnv = %v, %v; want an error containing %q", c, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer c.conn.Close()
			if c.Rank() != 3 || c.Size() != 4 {
				t.Fatalf("rank %d size %d", c.Rank(), c.Size())
			}
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestFromEnvPortBadID(t *testing.T) {
	clearPMIEnv(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	t.Setenv(EnvPort, ln.Addr().String())
	t.Setenv(EnvID, "x")
	if c, err := FromEnv(); c != nil || !errors.Is(err, ErrInvalid) {
		t.Fatalf("FromEnv with PMI_ID=x: %v, %v", c, err)
	}
}

// mpiexec returns the path of MPICH's mpiexec, or skips.
func mpiexec(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("mpiexec.mpich")
	if err != nil {
		testskip.Skip(t, testskip.NoMPICH, "mpiexec.mpich not on PATH (apt-get install mpich)")
	}
	return p
}

func runUnderMpiexec(t *testing.T, role string, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, mpiexec(t), append(args, testrole.Argv()...)...)
	cmd.Env = append(os.Environ(), testrole.Setting(role))

	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("mpiexec still running after 2 minutes:\n%s", out.String())
	}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	return out.String(), cmd.ProcessState.ExitCode()
}

// TestHydra runs 3 processes under MPICH's mpiexec, with the socket in
// PMI_FD and in the PMI_PORT model.
func TestHydra(t *testing.T) {
	for _, mode := range [][]string{{"-n", "3"}, {"-pmi-port", "-n", "3"}} {
		t.Run(strings.Join(mode, " "), func(t *testing.T) {
			out, code := runUnderMpiexec(t, "kvs", mode...)
			if code != 0 {
				t.Fatalf("exit %d:\n%s", code, out)
			}
			for r := range 3 {
				if !strings.Contains(out, fmt.Sprintf("ok rank %d of 3 kvs ", r)) {
					t.Fatalf("rank %d did not finish:\n%s", r, out)
				}
			}
		})
	}
}

// TestHydraAllgather: Allgather under MPICH's mpiexec, whose key-value
// space takes the table's chunks of MaxValue bytes: 5 ranks (a table of
// 4 chunks), and 3 in the PMI_PORT model.
func TestHydraAllgather(t *testing.T) {
	for _, mode := range [][]string{{"-n", "5"}, {"-pmi-port", "-n", "3"}} {
		t.Run(strings.Join(mode, " "), func(t *testing.T) {
			out, code := runUnderMpiexec(t, "allgather", mode...)
			if code != 0 {
				t.Fatalf("exit %d:\n%s", code, out)
			}
			n, _ := strconv.Atoi(mode[len(mode)-1])
			for r := range n {
				if !strings.Contains(out, fmt.Sprintf("ok rank %d of %d allgather, ", r, n)) {
					t.Fatalf("rank %d did not finish:\n%s", r, out)
				}
			}
			t.Log(out)
		})
	}
}

// TestHydraAbort: an Abort's code becomes mpiexec's exit status, and the
// other ranks are ended.
func TestHydraAbort(t *testing.T) {
	start := time.Now()
	out, code := runUnderMpiexec(t, "abort", "-n", "3")
	if code != 7 {
		t.Fatalf("exit %d, want 7:\n%s", code, out)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Fatalf("the waiting ranks were not ended: took %v", d)
	}
}

// TestSlurmReplies: the reply forms of Slurm's mpi/pmi2 plugin, which
// serves PMI-1 clients too (src/plugins/mpi/pmi2/pmi1.c): rc in every
// reply, a kvsname "JOB.STEP", rc=1 without msg for a missing key.
func TestSlurmReplies(t *testing.T) {
	cc, sc := socketPair(t)
	wait := serve(sc, []step{
		{"cmd=init pmi_version=1 pmi_subversion=1", "cmd=response_to_init rc=0 pmi_version=1 pmi_subversion=1", false},
		{"cmd=get_maxes", "cmd=maxes rc=0 kvsname_max=256 keylen_max=256 vallen_max=1024", false},
		{"cmd=get_my_kvsname", "cmd=my_kvsname rc=0 kvsname=4242.0", false},
		{"cmd=put kvsname=4242.0 key=k value=v", "cmd=put_result rc=0", false},
		{"cmd=barrier_in", "cmd=barrier_out rc=0", false},
		{"cmd=get kvsname=4242.0 key=k", "cmd=get_result rc=0 value=v", false},
		{"cmd=get kvsname=4242.0 key=x", "cmd=get_result rc=1", false},
		{"cmd=finalize", "cmd=finalize_ack rc=0", false},
	})
	c, err := newClient(cc, 0, 2)
	if err != nil {
		t.Fatal(err)
	}
	if c.KVSName() != "4242.0" {
		t.Fatalf("kvs %q", c.KVSName())
	}
	if err := c.Put("k", "v"); err != nil {
		t.Fatal(err)
	}
	if err := c.Barrier(); err != nil {
		t.Fatal(err)
	}
	if v, err := c.Get("k"); err != nil || v != "v" {
		t.Fatalf("Get = %q, %v", v, err)
	}
	if _, err := c.Get("x"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get of a missing key: %v", err)
	}
	if err := c.Finalize(); err != nil {
		t.Fatal(err)
	}
	if _, err := wait(); err != nil {
		t.Fatal(err)
	}
}
