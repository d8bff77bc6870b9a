package mpi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tachyon-hpc/tachyon/cvar"
	"github.com/tachyon-hpc/tachyon/internal/testrole"
	"github.com/tachyon-hpc/tachyon/internal/testskip"
)

// interceptEnv, if set, registers passThrough in every process of the
// tests, so that the whole suite runs through the interception path (the
// general path of every routine, none of the in-line usual cases): CI
// runs the package once so.
const interceptEnv = "MPI_TEST_INTERCEPT"

func init() {
	if os.Getenv(interceptEnv) != "" {
		Intercept(passThrough)
	}
}

// passThrough is an interceptor that only passes the call on.
func passThrough(c *Call, next Handler) error { return next(c) }

// withInterceptor runs fn with i registered, and tests that would see
// another test's interceptor (interceptEnv) skip.
func withInterceptor(t *testing.T, i Interceptor, fn func()) {
	t.Helper()
	if intercepted() {
		testskip.Skip(t, testskip.Intercepted, "a pass-through interceptor is registered for the whole run ("+interceptEnv+")")
	}
	remove, err := Intercept(i)
	if err != nil {
		t.Fatal(err)
	}
	defer remove()
	fn()
}

// callLog records the operations interceptors see, per rank.
type callLog struct {
	mu    sync.Mutex
	calls map[int][]string
}

func (l *callLog) interceptor(c *Call, next Handler) error {
	err := next(c)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.calls == nil {
		l.calls = map[int][]string{}
	}
	l.calls[c.Rank] = append(l.calls[c.Rank], c.Op.String())
	return err
}

// TestInterceptOncePerCall: every routine a rank calls is seen exactly
// once, under its own name, and none of the routines the facade builds it
// on (Sendrecv's Irecv, Send and Wait; Testall's Waitall; Finalize's
// barrier).
func TestInterceptOncePerCall(t *testing.T) {
	var log callLog
	withInterceptor(t, log.interceptor, func() {
		err := Main(2, func(c *Comm) error {
			me, peer := c.Rank(), 1-c.Rank()
			buf := make([]byte, 8)
			if me == 0 {
				if err := c.Send(buf, peer, 1); err != nil {
					return err
				}
				if err := c.Ssend(buf, peer, 2); err != nil {
					return err
				}
				r, err := c.Isend(buf, peer, 3)
				if err != nil {
					return err
				}
				if _, err := r.Wait(); err != nil {
					return err
				}
				l, err := Strided(2, 2, 4)
				if err != nil {
					return err
				}
				if err := c.SendLayout(buf, l, peer, 4); err != nil {
					return err
				}
			} else {
				if _, err := c.Recv(buf, peer, 1); err != nil {
					return err
				}
				if _, err := c.Probe(peer, 2); err != nil {
					return err
				}
				if _, err := c.Recv(buf, peer, 2); err != nil {
					return err
				}
				r, err := c.Irecv(buf, peer, 3)
				if err != nil {
					return err
				}
				if _, _, err := Testall([]*Request{r}); err != nil {
					return err
				}
				if _, err := Waitall([]*Request{r}); err != nil {
					return err
				}
				if _, err := c.Recv(buf, peer, 4); err != nil {
					return err
				}
			}
			if _, err := c.Sendrecv(buf, peer, 5, buf, peer, 5); err != nil {
				return err
			}
			d, err := c.Dup()
			if err != nil {
				return err
			}
			if err := d.Free(); err != nil {
				return err
			}
			return c.Barrier()
		})
		if err != nil {
			t.Fatal(err)
		}
	})
	want := map[int][]string{
		0: {"Send", "Ssend", "Isend", "Wait", "SendLayout", "Sendrecv", "Dup", "CommFree", "Barrier", "Finalize"},
		1: {"Recv", "Probe", "Recv", "Irecv", "Testall", "Waitall", "Recv", "Sendrecv", "Dup", "CommFree", "Barrier", "Finalize"},
	}
	for rank, w := range want {
		if got := log.calls[rank]; !slices.Equal(got, w) {
			t.Errorf("rank %d saw %v, want %v", rank, got, w)
		}
	}
}

// TestInterceptStacking: interceptors nest in the order they were added,
// the first outermost; a removed one is seen no more; neither adding nor
// removing is allowed while MPI runs.
func TestInterceptStacking(t *testing.T) {
	if intercepted() {
		testskip.Skip(t, testskip.Intercepted, "a pass-through interceptor is registered for the whole run ("+interceptEnv+")")
	}
	var mu sync.Mutex
	var trace []string
	tool := func(name string) Interceptor {
		return func(c *Call, next Handler) error {
			mu.Lock()
			trace = append(trace, name+">"+c.Op.String())
			mu.Unlock()
			err := next(c)
			mu.Lock()
			trace = append(trace, "<"+name)
			mu.Unlock()
			return err
		}
	}
	removeA, errA := Intercept(tool("A"))
	removeB, errB := Intercept(tool("B"))
	if errA != nil || errB != nil {
		t.Fatal(errA, errB)
	}
	barrier := func() {
		t.Helper()
		err := Run(1, func(c *Comm) error {
			if _, err := Intercept(passThrough); !errors.Is(err, ErrOther) {
				return fmt.Errorf("Intercept while a world runs: %v", err)
			}
			if err := removeB(); !errors.Is(err, ErrOther) {
				return fmt.Errorf("remove while a world runs: %v", err)
			}
			return c.Barrier()
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	barrier()
	if err := removeA(); err != nil {
		t.Fatal(err)
	}
	if err := removeA(); err != nil { // a second time does nothing
		t.Fatal(err)
	}
	barrier()
	if err := removeB(); err != nil {
		t.Fatal(err)
	}
	want := []string{"A>Barrier", "B>Barrier", "<B", "<A", "B>Barrier", "<B"}
	if !slices.Equal(trace, want) {
		t.Fatalf("trace %v, want %v", trace, want)
	}
	if intercepted() {
		t.Fatal("an interceptor is still registered after both were removed")
	}
	if _, err := Intercept(nil); !errors.Is(err, ErrArg) {
		t.Fatalf("Intercept(nil): %v", err)
	}
}

// TestInterceptChangesBehaviour: an interceptor sees a call's arguments
// and result, can refuse a call (its error reaches the caller and the
// operation does not happen) and can change a call's tag.
func TestInterceptChangesBehaviour(t *testing.T) {
	errRefused := errors.New("refused by the tool")
	tool := func(c *Call, next Handler) error {
		switch {
		case c.Op == OpSend && c.Tag == 13:
			return errRefused
		case c.Op == OpSend && c.Tag == 7:
			c.Tag = 8
		}
		return next(c)
	}
	var seen []string
	var mu sync.Mutex
	watch := func(c *Call, next Handler) error {
		err := next(c)
		if c.Op == OpRecv {
			st := c.Result.Status
			mu.Lock()
			seen = append(seen, fmt.Sprintf("Recv peer %d tag %d bytes %d got %d from %d tag %d",
				c.Peer, c.Tag, c.Bytes, st.Count, st.Source, st.Tag))
			mu.Unlock()
		}
		return err
	}
	withInterceptor(t, tool, func() {
		remove, err := Intercept(watch)
		if err != nil {
			t.Fatal(err)
		}
		defer remove()
		err = Run(2, func(c *Comm) error {
			if c.Rank() == 0 {
				if err := c.Send([]byte("x"), 1, 13); err != errRefused {
					return fmt.Errorf("refused Send returned %v", err)
				}
				return c.Send([]byte("hello"), 1, 7)
			}
			buf := make([]byte, 16)
			if _, err := c.Recv(buf, 0, 8); err != nil {
				return err
			}
			if _, found, err := c.Iprobe(AnySource, AnyTag); err != nil || found {
				return fmt.Errorf("a message arrived besides the retagged one (%v, %v)", found, err)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	})
	want := []string{"Recv peer 0 tag 8 bytes 16 got 5 from 0 tag 8"}
	if !slices.Equal(seen, want) {
		t.Fatalf("saw %v, want %v", seen, want)
	}
}

// TestPcontrol: Pcontrol reaches the interceptors with its level, and
// without them does nothing.
func TestPcontrol(t *testing.T) {
	var levels []int
	withInterceptor(t, func(c *Call, next Handler) error {
		if c.Op == OpPcontrol {
			levels = append(levels, c.Level)
		}
		return next(c)
	}, func() {
		for _, lv := range []int{0, 1, 2, 7} {
			if err := Pcontrol(lv); err != nil {
				t.Fatal(err)
			}
		}
	})
	if !slices.Equal(levels, []int{0, 1, 2, 7}) {
		t.Fatalf("levels %v", levels)
	}
	if err := Pcontrol(1); err != nil {
		t.Fatalf("Pcontrol without tools: %v", err)
	}
}

// TestInterceptAllocs: a registered interceptor costs the message-rate
// loop no allocation, with its requests in a local array.
func TestInterceptAllocs(t *testing.T) {
	if raceEnabled {
		testskip.Skip(t, testskip.RaceDetector, "the race detector's sync.Pool drops Calls on purpose")
	}
	withInterceptor(t, passThrough, func() {
		err := Run(1, func(c *Comm) error {
			buf := make([]byte, 8)
			window := func() {
				var reqs [2]*Request // in the frame: the interceptors keep no caller's slice
				reqs[0], _ = c.Irecv(buf, 0, 1)
				reqs[1], _ = c.Isend(buf, 0, 1)
				WaitallInto(reqs[:], nil)
			}
			window()
			if n := testing.AllocsPerRun(200, window); n != 0 {
				return fmt.Errorf("%.1f allocations per intercepted Irecv, Isend and WaitallInto", n)
			}
			return c.Finalize()
		})
		if err != nil {
			t.Fatal(err)
		}
	})
}

// TestInterceptEveryOpNamed: every operation has a name of its own.
func TestInterceptEveryOpNamed(t *testing.T) {
	seen := map[string]Op{}
	for op := OpInit; op < opEnd; op++ {
		s := op.String()
		if s == "" || strings.HasPrefix(s, "Op(") {
			t.Errorf("operation %d has no name", op)
		}
		if o, dup := seen[s]; dup {
			t.Errorf("operations %d and %d are both %q", o, op, s)
		}
		seen[s] = op
	}
	if s := opEnd.String(); !strings.HasPrefix(s, "Op(") {
		t.Errorf("opEnd is named %q", s)
	}
}

// TestInterceptLocalRoutines: the routines that move no message but
// that a tool may want to see (timers, the attached buffer, packing) are
// seen once each, with their arguments and results, and a tool that
// refuses one stops it.
func TestInterceptLocalRoutines(t *testing.T) {
	type seen struct {
		op          Op
		bytes       int
		due         float64
		count       int
		buffer, ctx bool
		request     bool
	}
	var (
		mu   sync.Mutex
		log  []seen
		buf  = make([]byte, 1024)
		errR = errors.New("refused by the tool")
	)
	tool := func(c *Call, next Handler) error {
		if c.Op == OpUnpack && c.Bytes == 3 {
			return errR
		}
		err := next(c)
		if c.Op < OpTimerCreate || c.Op > OpAbort {
			return err
		}
		s := seen{op: c.Op, bytes: c.Bytes, due: c.Due, count: c.Result.Count, ctx: c.Ctx != nil}
		s.buffer = len(c.Result.Buffer) == len(buf) && &c.Result.Buffer[0] == &buf[0]
		s.request = c.Result.Request != nil || c.Request != nil
		mu.Lock()
		log = append(log, s)
		mu.Unlock()
		return err
	}
	withInterceptor(t, tool, func() {
		err := Run(1, func(c *Comm) error {
			r, err := TimerCreate(30)
			if err != nil {
				return err
			}
			if err := r.ResetTimer(0.001); err != nil {
				return err
			}
			if _, err := r.Wait(); err != nil {
				return err
			}
			if err := c.BufferAttach(buf); err != nil {
				return err
			}
			if _, err := c.BufferDetach(); err != nil {
				return err
			}
			if err := c.BufferAttach(buf); err != nil {
				return err
			}
			if _, err := c.BufferDetachContext(context.Background()); err != nil {
				return err
			}
			l, err := Strided(2, 2, 4) // 4 bytes of 6
			if err != nil {
				return err
			}
			src, packed := []byte("abcdef"), make([]byte, 4)
			if n, err := Pack(l, src, packed); err != nil || n != 4 || string(packed) != "abef" {
				return fmt.Errorf("Pack: %d, %q, %v", n, packed, err)
			}
			dst := make([]byte, 6)
			if n, err := l.Unpack(dst, packed); err != nil || n != 4 || string(dst) != "ab\x00\x00ef" {
				return fmt.Errorf("Unpack: %d, %q, %v", n, dst, err)
			}
			three := Contiguous(3)
			if _, err := three.Unpack(dst, []byte("xyz")); err != errR || string(dst) != "ab\x00\x00ef" {
				return fmt.Errorf("a refused Unpack: %v, %q", err, dst)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	})
	want := []seen{
		{op: OpTimerCreate, due: 30, request: true},
		{op: OpResetTimer, due: 0.001, request: true},
		{op: OpBufferAttach, bytes: len(buf)},
		{op: OpBufferDetach, buffer: true},
		{op: OpBufferAttach, bytes: len(buf)},
		{op: OpBufferDetach, buffer: true, ctx: true},
		{op: OpPack, bytes: 4, count: 4},
		{op: OpUnpack, bytes: 4, count: 4},
	}
	if !slices.Equal(log, want) {
		t.Fatalf("saw\n%+v\nwant\n%+v", log, want)
	}
}

// The role of TestInterceptAbort: a tool that sees Abort and does not
// call next; the job ends all the same.
func init() {
	serviceRoles["intercept-abort"] = func() int {
		if _, err := Intercept(func(c *Call, next Handler) error {
			if c.Op == OpAbort {
				fmt.Printf("tool saw Abort code %d rank %d\n", c.Code, c.Rank)
				return nil
			}
			return next(c)
		}); err != nil {
			return testrole.Status("intercept-abort", err)
		}
		if err := Init(); err != nil {
			return testrole.Status("intercept-abort", err)
		}
		Abort(World(), 5)
		return testrole.Status("intercept-abort", errors.New("the process runs on after Abort"))
	}
}

// TestInterceptAbort: Abort reaches the interceptors with its code and
// rank before the job ends, and ends it (exit status the code) though
// the tool did not call next.
func TestInterceptAbort(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := testrole.CommandContext(ctx, "intercept-abort", []string{"TACHYON_METRICS_STAT=0"})
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 5 {
		t.Fatalf("%v, want exit status 5\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	if !strings.Contains(stdout.String(), "tool saw Abort code 5 rank 0\n") {
		t.Fatalf("the tool did not see Abort:\nstdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	}
}

// describeCall is what TestInterceptSessionsAndState checks of a Call
// once next has returned: the fields its operation fills, the results
// it made, and whether it failed.
func describeCall(c *Call, err error) string {
	s := fmt.Sprintf("%v rank=%d", c.Op, c.Rank)
	add := func(on bool, f string, args ...any) {
		if on {
			s += " " + fmt.Sprintf(f, args...)
		}
	}
	r := &c.Result
	add(c.Comm != nil, "comm")
	add(c.Session != nil, "session")
	add(c.Listener != nil, "listener")
	add(c.Port != "", "port")
	add(c.Name != "", "name=%s", c.Name)
	add(c.Peer != Undefined, "peer=%d", c.Peer)
	add(c.High, "high")
	add(c.Keyval != nil, "keyval")
	add(c.Value != nil, "value=%v", c.Value)
	add(c.Errhandler != nil, "errhandler")
	add(c.Err != nil, "err")
	add(c.Ctx != nil, "ctx")
	add(r.Session != nil, "->session")
	add(r.Listener != nil, "->listener")
	add(r.Port != "", "->port")
	add(r.NewComm != nil, "->comm")
	add(r.Keyval != nil, "->keyval")
	add(r.Errhandler != nil, "->errhandler")
	add(r.Err != nil, "->err")
	add(err != nil, "failed")
	return s
}

// TestInterceptSessionsAndState: the routines of sessions, connections,
// the name service, attributes, error handlers and error classes are
// seen once each with the fields they fill and what they made; a tool
// that refuses one stops it and its caller gets the tool's error; the
// facade's own calls (Disconnect's Free, Session.Close's Listener.Close)
// are not seen.
func TestInterceptSessionsAndState(t *testing.T) {
	v, _ := cvar.Lookup("mpi_name_dir")
	oldDir := v.String()
	cvar.Set("mpi_name_dir", t.TempDir())
	defer cvar.Set("mpi_name_dir", oldDir)
	errR := errors.New("refused by the tool")
	var (
		mu   sync.Mutex
		seen []string
	)
	tool := func(c *Call, next Handler) error {
		if c.Op < OpNewSession && c.Op != OpCommFree {
			return next(c)
		}
		var err error
		switch {
		case c.Op == OpSetAttr && c.Value == "refuse", c.Op == OpLookupName && c.Name == "refuse",
			c.Op == OpNewKeyval && c.args.(keyvalArgs).extra == "refuse":
			err = errR
		default:
			err = next(c)
		}
		mu.Lock()
		seen = append(seen, describeCall(c, err))
		mu.Unlock()
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	withInterceptor(t, tool, func() {
		// Two sessions of this process, connected by Listen and Dial.
		srv, err := NewSession(WithStandalone())
		if err != nil {
			t.Fatal(err)
		}
		cli, err := NewSession(WithStandalone())
		if err != nil {
			t.Fatal(err)
		}
		ln, err := srv.Listen("127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		accepted := make(chan *Comm, 1)
		go func() {
			c, err := ln.Accept(ctx)
			if err != nil {
				t.Error("Accept:", err)
			}
			accepted <- c
		}()
		cc, err := cli.Dial(ctx, ln.Addr().String())
		if err != nil {
			t.Fatal("Dial:", err)
		}
		sc := <-accepted
		if sc == nil {
			t.FailNow()
		}
		if err := ln.Close(); err != nil {
			t.Fatal(err)
		}
		if err := cc.Disconnect(); err != nil {
			t.Fatal(err)
		}
		if err := sc.DisconnectContext(ctx); err != nil {
			t.Fatal(err)
		}
		g, err := srv.GroupFromPset(PsetWorld)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := srv.CommFromGroup(g, "tag"); err != nil {
			t.Fatal(err)
		}
		if _, err := srv.Listen("127.0.0.1:0"); err != nil { // closed by Session.Close, unseen
			t.Fatal(err)
		}
		if err := srv.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if err := cli.Close(ctx); err != nil {
			t.Fatal(err)
		}

		// Ports and names.
		port, err := OpenPort()
		if err != nil {
			t.Fatal(err)
		}
		if err := PublishName("svc", port); err != nil {
			t.Fatal(err)
		}
		if got, err := LookupName("svc"); err != nil || got != port {
			t.Fatalf("LookupName: %q, %v", got, err)
		}
		if got, err := LookupName("refuse"); err != errR || got != "" {
			t.Fatalf("a refused LookupName: %q, %v", got, err)
		}
		if err := UnpublishName("svc", port); err != nil {
			t.Fatal(err)
		}
		if err := ClosePort(port); err != nil {
			t.Fatal(err)
		}
		if err := ClosePort(port); !errors.Is(err, ErrPort) {
			t.Fatalf("ClosePort twice: %v, want ErrPort", err)
		}

		// Accept, Connect and Merge between two worlds of Run: a has
		// one rank (Accept), b one (Connect).
		twoWorlds(t, 1, 1, func(inter *Comm) error {
			_, err := inter.Merge(false)
			return err
		}, func(inter *Comm) error {
			_, err := inter.Merge(true)
			return err
		})

		// Attributes, error handlers and error classes, on a rank of Run.
		err = Run(1, func(c *Comm) error {
			if k := NewKeyval(nil, nil, "refuse"); k != nil {
				return fmt.Errorf("a refused NewKeyval returned %v", k)
			}
			k := NewKeyval(nil, nil, nil)
			if err := c.SetAttr(k, 7); err != nil {
				return err
			}
			if err := c.SetAttr(k, "refuse"); err != errR {
				return fmt.Errorf("a refused SetAttr: %v", err)
			}
			if v, ok, err := c.Attr(k); err != nil || !ok || v != 7 {
				return fmt.Errorf("Attr after a refused SetAttr: %v, %v, %v", v, ok, err)
			}
			if err := c.DeleteAttr(k); err != nil {
				return err
			}
			if err := k.Free(); err != nil {
				return err
			}
			called := 0
			h, err := NewErrhandler(func(*Comm, error) { called++ })
			if err != nil {
				return err
			}
			if err := c.SetErrhandler(h); err != nil {
				return err
			}
			if err := c.CallErrhandler(errR); err != errR || called != 1 {
				return fmt.Errorf("CallErrhandler: %v, handler called %d times", err, called)
			}
			if err := c.SetErrhandler(ErrorsReturn); err != nil {
				return err
			}
			cls, err := AddErrorClass()
			if err != nil {
				return err
			}
			code, err := AddErrorCode(cls)
			if err != nil {
				return err
			}
			if err := AddErrorString(code, "text"); err != nil {
				return err
			}
			d, err := c.Dup()
			if err != nil {
				return err
			}
			return d.Disconnect() // no connection's: its Free is unseen
		})
		if err != nil {
			t.Fatal(err)
		}
	})
	u := Undefined
	want := []string{
		fmt.Sprintf("NewSession rank=%d ->session", u),
		fmt.Sprintf("NewSession rank=%d ->session", u),
		"Listen rank=0 session port ->listener",
		"ListenerAccept rank=0 session listener ctx ->comm",
		"Dial rank=0 session port ctx ->comm",
		"ListenerClose rank=0 session listener",
		"Disconnect rank=1 comm", // the dialing side, rank 1 of the connection's world
		"Disconnect rank=0 comm ctx",
		"CommFromGroup rank=0 session name=tag ->comm",
		"Listen rank=0 session port ->listener",
		"SessionClose rank=0 session ctx",
		"SessionClose rank=0 session ctx",
		fmt.Sprintf("OpenPort rank=%d ->port", u),
		fmt.Sprintf("PublishName rank=%d port name=svc", u),
		fmt.Sprintf("LookupName rank=%d name=svc ->port", u),
		fmt.Sprintf("LookupName rank=%d name=refuse failed", u),
		fmt.Sprintf("UnpublishName rank=%d port name=svc", u),
		fmt.Sprintf("ClosePort rank=%d port", u),
		fmt.Sprintf("ClosePort rank=%d port failed", u),
		fmt.Sprintf("OpenPort rank=%d ->port", u), // twoWorlds's port
		"Accept rank=0 comm port peer=0 ->comm",
		"Connect rank=0 comm port peer=0 ->comm",
		"Merge rank=0 comm ->comm",
		"Merge rank=1 comm high ->comm", // the connecting side, rank 1 of the connection's world
		"Disconnect rank=0 comm",
		"Disconnect rank=1 comm",
		fmt.Sprintf("ClosePort rank=%d port", u),
		fmt.Sprintf("NewKeyval rank=%d failed", u),
		fmt.Sprintf("NewKeyval rank=%d ->keyval", u),
		"SetAttr rank=0 comm keyval value=7",
		"SetAttr rank=0 comm keyval value=refuse failed",
		"DeleteAttr rank=0 comm keyval",
		fmt.Sprintf("KeyvalFree rank=%d keyval", u),
		fmt.Sprintf("NewErrhandler rank=%d ->errhandler", u),
		"SetErrhandler rank=0 comm errhandler",
		"CallErrhandler rank=0 comm err failed",
		"SetErrhandler rank=0 comm errhandler",
		fmt.Sprintf("AddErrorClass rank=%d ->err", u),
		fmt.Sprintf("AddErrorCode rank=%d err ->err", u),
		fmt.Sprintf("AddErrorString rank=%d name=text err", u),
		"Disconnect rank=0 comm",
	}
	// The two worlds of twoWorlds run at once: compare as multisets.
	slices.Sort(seen)
	slices.Sort(want)
	if !slices.Equal(seen, want) {
		t.Fatalf("saw\n\t%s\nwant\n\t%s", strings.Join(seen, "\n\t"), strings.Join(want, "\n\t"))
	}
}
