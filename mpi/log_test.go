package mpi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/tachyon-hpc/tachyon/internal/testrole"
)

// records parses the JSON lines of a slog.JSONHandler.
func records(t *testing.T, out string) []map[string]any {
	t.Helper()
	var recs []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line == "" {
			continue
		}
		var r map[string]any
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("not a JSON record: %q: %v", line, err)
		}
		recs = append(recs, r)
	}
	return recs
}

// findRecord returns the first record of level whose message contains msg.
func findRecord(recs []map[string]any, level, msg string) map[string]any {
	for _, r := range recs {
		if r["level"] == level && strings.Contains(fmt.Sprint(r["msg"]), msg) {
			return r
		}
	}
	return nil
}

// TestSessionLogger: a session's records go to the logger WithLogger
// gave it, named by the session.
func TestSessionLogger(t *testing.T) {
	var out testrole.Output
	srv := newTestSession(t, WithName("logged"), WithLogger(slog.New(slog.NewJSONHandler(&out, nil))), WithStat(false))
	ln, err := srv.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	junk, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	junk.Write([]byte("GET / HTTP/1.0\r\n\r\n"))
	defer junk.Close()
	var r map[string]any
	for deadline := time.Now().Add(10 * time.Second); r == nil; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no record of the refused handshake:\n%s", out.String())
		}
		r = findRecord(records(t, out.String()), "WARN", "handshake failed")
	}
	if r["tachyon_session"] != "logged" || !strings.Contains(fmt.Sprint(r["err"]), "not a Tachyon peer") {
		t.Fatalf("record %v: want tachyon_session=logged and the handshake's error", r)
	}
}

// The roles of TestNothingOnStderr: each logs JSON records on its
// standard output and ends the job as MPI says.
func init() {
	serviceRoles["log-fatal"] = func() int { // a session's world under ErrorsAreFatal
		lg := slog.New(slog.NewJSONHandler(os.Stdout, nil))
		s, err := NewSession(WithStandalone(), WithName("fatal"), WithLogger(lg), WithStat(true))
		if err != nil {
			return testrole.Status("log-fatal", err)
		}
		if err := s.World().SetErrhandler(ErrorsAreFatal); err != nil {
			return testrole.Status("log-fatal", err)
		}
		err = s.World().Send(nil, 99, 0)
		return testrole.Status("log-fatal", fmt.Errorf("the process runs on after %v", err))
	}
	serviceRoles["log-abort"] = func() int { // Init's session, logging to slog.Default()
		slog.SetDefault(slog.New(slog.NewJSONHandler(os.Stdout, nil)))
		if err := Init(); err != nil {
			return testrole.Status("log-abort", err)
		}
		Abort(World(), 7)
		return testrole.Status("log-abort", errors.New("the process runs on after Abort"))
	}
}

// TestNothingOnStderr: a process whose tachyonstat file cannot be made
// and whose job ends by ErrorsAreFatal, or Abort, writes nothing on its
// standard error: it says so in records to its session's logger (the
// one WithLogger gave, or slog.Default() for Init's), which name the
// session.
func TestNothingOnStderr(t *testing.T) {
	for _, tc := range []struct {
		role, session string
		code          int
		reason, err   string
	}{
		{"log-fatal", "fatal", 1, "ErrorsAreFatal", "destination 99"},
		{"log-abort", "default", 7, "Abort(7) called", ""},
	} {
		t.Run(tc.role, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cmd := testrole.CommandContext(ctx, tc.role, []string{"TACHYON_METRICS_STAT_DIR=" + t.TempDir() + "/missing", "TACHYON_METRICS_STAT=1"})
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != tc.code {
				t.Fatalf("%v, want exit status %d\nstdout:\n%s\nstderr:\n%s", err, tc.code, stdout.String(), stderr.String())
			}
			if stderr.Len() != 0 {
				t.Fatalf("standard error:\n%s", stderr.String())
			}
			recs := records(t, stdout.String())
			warn := findRecord(recs, "WARN", "tachyonstat will not see this session")
			if warn == nil || warn["tachyon_session"] != tc.session || !strings.Contains(fmt.Sprint(warn["err"]), "missing") {
				t.Errorf("the tachyonstat warning: %v\n%s", warn, stdout.String())
			}
			end := findRecord(recs, "ERROR", "aborting the job")
			if end == nil || end["tachyon_session"] != tc.session || end["rank"] != 0.0 || end["exit_status"] != float64(tc.code) ||
				!strings.Contains(fmt.Sprint(end["reason"]), tc.reason) || !strings.Contains(fmt.Sprint(end["err"]), tc.err) {
				t.Errorf("the job's end: %v\n%s", end, stdout.String())
			}
		})
	}
}
