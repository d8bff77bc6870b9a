package trace

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tachyon-hpc/tachyon/internal/testskip"
	"github.com/tachyon-hpc/tachyon/mpi"
)

// event is a trace event as the tests read it.
type event struct {
	Name string         `json:"name"`
	Ph   string         `json:"ph"`
	Ts   *float64       `json:"ts"`
	Dur  *float64       `json:"dur"`
	Pid  int            `json:"pid"`
	Tid  int            `json:"tid"`
	Args map[string]any `json:"args"`
}

// readTrace parses a merged trace.
func readTrace(t *testing.T, data []byte) []event {
	t.Helper()
	var tr struct {
		TraceEvents []event `json:"traceEvents"`
	}
	if err := json.Unmarshal(data, &tr); err != nil {
		t.Fatalf("the trace is not JSON: %v\n%s", err, data)
	}
	return tr.TraceEvents
}

// calls returns the complete events named name on rank's track.
func calls(evs []event, rank int, name string) []event {
	var out []event
	for _, e := range evs {
		if e.Ph == "X" && e.Tid == rank && e.Name == name {
			out = append(out, e)
		}
	}
	return out
}

// TestJob: a job's trace is one JSON file, with a track per rank named
// "rank N" and an event per call carrying its peer, tag and bytes; the
// ranks' own files are gone.
func TestJob(t *testing.T) {
	const ranks, k, size, tag = 3, 4, 48, 9
	path := filepath.Join(t.TempDir(), "job.json")
	tr, err := Install(path)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Remove()
	err = mpi.Main(ranks, func(c *mpi.Comm) error {
		buf := make([]byte, size)
		for i := 0; i < k; i++ {
			if c.Rank() == 0 {
				for dest := 1; dest < ranks; dest++ {
					if err := c.Send(buf, dest, tag); err != nil {
						return err
					}
				}
			} else if _, err := c.Recv(make([]byte, 2*size), mpi.AnySource, mpi.AnyTag); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.Err(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	evs := readTrace(t, data)
	for r := 0; r < ranks; r++ {
		if _, err := os.Stat(RankFile(path, r)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("rank %d's file %s left after the merge (%v)", r, RankFile(path, r), err)
		}
		named := false
		for _, e := range evs {
			if e.Ph == "M" && e.Name == "thread_name" && e.Tid == r && e.Args["name"] == "rank "+string(rune('0'+r)) {
				named = true
			}
		}
		if !named {
			t.Errorf("no track named rank %d", r)
		}
	}
	for _, e := range evs {
		if e.Pid != jobPID {
			t.Errorf("event %+v: pid %d, want %d", e, e.Pid, jobPID)
		}
		if e.Ph == "X" && (e.Ts == nil || e.Dur == nil || *e.Ts <= 0 || *e.Dur < 0) {
			t.Errorf("event %+v: bad ts or dur", e)
		}
	}
	sends := calls(evs, 0, "Send")
	if len(sends) != k*(ranks-1) {
		t.Fatalf("rank 0: %d Send events, want %d", len(sends), k*(ranks-1))
	}
	perPeer := map[float64]int{}
	for _, e := range sends {
		if e.Args["tag"] != float64(tag) || e.Args["bytes"] != float64(size) || e.Args["comm"] != "MPI_COMM_WORLD" {
			t.Errorf("rank 0: Send args %v, want tag %d, bytes %d, comm MPI_COMM_WORLD", e.Args, tag, size)
		}
		perPeer[e.Args["peer"].(float64)]++
	}
	for dest := 1; dest < ranks; dest++ {
		if perPeer[float64(dest)] != k {
			t.Errorf("rank 0: %d Sends to %d, want %d", perPeer[float64(dest)], dest, k)
		}
		recvs := calls(evs, dest, "Recv")
		if len(recvs) != k {
			t.Errorf("rank %d: %d Recv events, want %d", dest, len(recvs), k)
		}
		for _, e := range recvs { // the status's source, tag and size, not the wildcards and buffer
			if e.Args["peer"] != 0.0 || e.Args["tag"] != float64(tag) || e.Args["bytes"] != float64(size) {
				t.Errorf("rank %d: Recv args %v, want peer 0, tag %d, bytes %d", dest, e.Args, tag, size)
			}
		}
	}
}

// TestPcontrol: nothing is recorded between Pcontrol(0) and Pcontrol(1),
// and Pcontrol(2) writes what was recorded to the ranks' files at once.
func TestPcontrol(t *testing.T) {
	const off, on = 5, 3
	path := filepath.Join(t.TempDir(), "pc.json")
	tr, err := Install(path)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Remove()
	var flushed []byte
	err = mpi.Main(2, func(c *mpi.Comm) error {
		exchange := func(n int) error {
			for i := 0; i < n; i++ {
				var err error
				if c.Rank() == 0 {
					err = c.Send([]byte{1}, 1, 0)
				} else {
					_, err = c.Recv(make([]byte, 1), 0, 0)
				}
				if err != nil {
					return err
				}
			}
			return nil
		}
		// Pcontrol acts on the process: rank 0 turns it, and barriers
		// keep rank 1's calls on the same side of each turn.
		step := func(f func() error) error {
			if err := c.Barrier(); err != nil {
				return err
			}
			if c.Rank() == 0 {
				if err := f(); err != nil {
					return err
				}
			}
			return c.Barrier()
		}
		if err := step(func() error { return mpi.Pcontrol(0) }); err != nil {
			return err
		}
		if err := exchange(off); err != nil {
			return err
		}
		if err := step(func() error { return mpi.Pcontrol(1) }); err != nil {
			return err
		}
		if err := exchange(on); err != nil {
			return err
		}
		return step(func() error {
			if err := mpi.Pcontrol(2); err != nil {
				return err
			}
			var b bytes.Buffer
			if err := Merge(&b, RankFile(path, 0), RankFile(path, 1)); err != nil {
				return err
			}
			flushed = b.Bytes()
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.Err(); err != nil {
		t.Fatal(err)
	}
	early := readTrace(t, flushed)
	if n := len(calls(early, 0, "Send")); n != on {
		t.Errorf("rank 0's file after Pcontrol(2): %d Sends, want %d", n, on)
	}
	if n := len(calls(early, 1, "Recv")); n != on {
		t.Errorf("rank 1's file after Pcontrol(2): %d Recvs, want %d", n, on)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	evs := readTrace(t, data)
	if n := len(calls(evs, 0, "Send")); n != on {
		t.Errorf("rank 0: %d Sends traced, want %d (Pcontrol(0) stops recording)", n, on)
	}
	if n := len(calls(evs, 1, "Recv")); n != on {
		t.Errorf("rank 1: %d Recvs traced, want %d (Pcontrol(0) stops recording)", n, on)
	}
}

// TestInstallBadPath: a path that cannot be written is an error at once.
func TestInstallBadPath(t *testing.T) {
	dir := t.TempDir()
	for _, p := range []string{"", dir, filepath.Join(dir, "missing", "x.json")} {
		if tr, err := Install(p); err == nil {
			tr.Remove()
			t.Errorf("Install(%q) succeeded", p)
		}
	}
}

// TestRankFile names the ranks' files after the trace's.
func TestRankFile(t *testing.T) {
	for _, c := range []struct {
		path string
		rank int
		want string
	}{
		{"/tmp/job.json", 3, "/tmp/job.3.json"},
		{"job", 0, "job.0.json"},
		{"a.trace", 12, "a.trace.12.json"},
	} {
		if got := RankFile(c.path, c.rank); got != c.want {
			t.Errorf("RankFile(%q, %d) = %q, want %q", c.path, c.rank, got, c.want)
		}
	}
}

// TestMerge: files cut short after an event are merged; anything else
// that is not an array of objects is an error naming the file; MergeFiles
// leaves the ranks' files when it fails.
func TestMerge(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	whole := write("whole.json", `[{"name":"a","ph":"X","ts":1,"dur":2,"pid":1,"tid":0}]`)
	cut := write("cut.json", "[\n"+`{"name":"b","ph":"X","ts":3,"dur":1,"pid":1,"tid":1}`)
	empty := write("empty.json", "[]")
	var b bytes.Buffer
	if err := Merge(&b, whole, cut, empty); err != nil {
		t.Fatal(err)
	}
	evs := readTrace(t, b.Bytes())
	if len(evs) != 2 || evs[0].Name != "a" || evs[1].Name != "b" {
		t.Errorf("merged %+v, want events a and b", evs)
	}
	for name, bad := range map[string]string{
		"nothing.json":   "",
		"object.json":    `{"traceEvents":[]}`,
		"numbers.json":   "[1,2]",
		"halfevent.json": `[{"name":"a","ph":`,
		"after.json":     `[{"name":"a"}] [`,
		"garbage.json":   "not json",
	} {
		p := write(name, bad)
		if err := Merge(new(bytes.Buffer), whole, p); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("Merge of %s: %v, want an error naming it", name, err)
		}
	}
	if err := Merge(new(bytes.Buffer), filepath.Join(dir, "missing.json")); err == nil {
		t.Error("Merge of a missing file succeeded")
	}
	trace := filepath.Join(dir, "t.json")
	write("t.0.json", `[{"name":"a","ph":"X","ts":1,"dur":2,"pid":1,"tid":0}]`)
	if err := MergeFiles(trace, 2); err == nil {
		t.Error("MergeFiles with rank 1's file missing succeeded")
	}
	if _, err := os.Stat(RankFile(trace, 0)); err != nil {
		t.Errorf("a failed MergeFiles removed rank 0's file: %v", err)
	}
	if _, err := os.Stat(trace); err == nil {
		t.Error("a failed MergeFiles wrote the trace")
	}
	if err := MergeFiles(trace, 0); err == nil {
		t.Error("MergeFiles of 0 ranks succeeded")
	}
	if err := MergeFiles(trace, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(RankFile(trace, 0)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("MergeFiles left rank 0's file (%v)", err)
	}
}

// TestEncoding: names and errors of any bytes make valid JSON strings,
// and the microseconds keep nanoseconds.
func TestEncoding(t *testing.T) {
	for _, s := range []string{"", "plain", `q"uote\back`, "ctl\x00\x01\n\t\x1f", "ünï\u2028", "bad\xffutf8"} {
		var got string
		if err := json.Unmarshal(appendString(nil, s), &got); err != nil {
			t.Errorf("appendString(%q) = %s: %v", s, appendString(nil, s), err)
		} else if want := strings.ToValidUTF8(s, "\uFFFD"); got != want {
			t.Errorf("appendString(%q) reads back as %q", s, got)
		}
	}
	for ns, want := range map[int64]string{0: "0.000", 1: "0.001", 1234567: "1234.567", 1000: "1.000", -1500: "-1.500"} {
		if got := string(appendMicros(nil, ns)); got != want {
			t.Errorf("appendMicros(%d) = %s, want %s", ns, got, want)
		}
	}
	call := &mpi.Call{Op: mpi.OpSendrecv, Rank: 2, Peer: 1, Tag: 4, Bytes: 8, RecvPeer: mpi.AnySource, RecvTag: mpi.AnyTag,
		Result: mpi.Result{Status: mpi.Status{Source: 3, Tag: 5, Count: 6}}}
	b := appendEvent(nil, call, errors.New(`failed "here"`), epoch.Add(time.Second), time.Microsecond, 2)
	b, ok := bytes.CutPrefix(b, []byte(",\n"))
	if !ok {
		t.Fatalf("%s: does not start with a comma and a newline", b)
	}
	var evs []event
	if err := json.Unmarshal(append(append([]byte("["), b...), ']'), &evs); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	if len(evs) != 1 || evs[0].Name != "Sendrecv" || evs[0].Tid != 2 || *evs[0].Ts != 1e6 || *evs[0].Dur != 1 ||
		evs[0].Args["peer"] != 1.0 || evs[0].Args["recv_peer"] != float64(mpi.AnySource) || evs[0].Args["error"] != `failed "here"` {
		t.Errorf("event %s", b)
	}
	if _, ok := evs[0].Args["recv_bytes"]; ok {
		t.Errorf("a failed Sendrecv has recv_bytes: %s", b)
	}
}

// TestAppendEventAllocs: recording a call into a buffer with room
// allocates nothing.
func TestAppendEventAllocs(t *testing.T) {
	if raceEnabled {
		testskip.Skip(t, testskip.RaceDetector, "the race detector allocates")
	}
	buf := make([]byte, 0, 1<<16)
	call := &mpi.Call{Op: mpi.OpSend, Rank: 0, Peer: 1, Tag: 0, Bytes: 8, RecvPeer: mpi.Undefined, RecvTag: mpi.Undefined}
	start := time.Now()
	if n := testing.AllocsPerRun(100, func() {
		buf = appendEvent(buf[:0], call, nil, start, time.Microsecond, 0)
	}); n != 0 {
		t.Errorf("appendEvent: %v allocations, want 0", n)
	}
}
