package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// TestMerge: rank files become one trace, to a file or standard output;
// a bad file is status 1 and leaves no output file; no files is status 2.
func TestMerge(t *testing.T) {
	dir := t.TempDir()
	write := func(p, s string) {
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r0 := filepath.Join(dir, "j.0.json")
	r1 := filepath.Join(dir, "j.1.json")
	write(r0, `[{"name":"Send","ph":"X","ts":1,"dur":1,"pid":1,"tid":0}]`)
	write(r1, "[\n"+`{"name":"Recv","ph":"X","ts":2,"dur":1,"pid":1,"tid":1}`) // cut short
	out := filepath.Join(dir, "j.json")
	var stdout, stderr bytes.Buffer
	if st := run([]string{"-o", out, r0, r1}, &stdout, &stderr); st != 0 {
		t.Fatalf("status %d: %s", st, stderr.String())
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var tr struct{ TraceEvents []map[string]any }
	if err := json.Unmarshal(data, &tr); err != nil || len(tr.TraceEvents) != 2 {
		t.Fatalf("merged %s: %v, want 2 events", data, err)
	}
	stdout.Reset()
	if st := run([]string{r0}, &stdout, &stderr); st != 0 || !json.Valid(stdout.Bytes()) {
		t.Errorf("to standard output: status %d, %q", st, stdout.String())
	}
	bad := filepath.Join(dir, "bad.json")
	write(bad, "nonsense")
	out2 := filepath.Join(dir, "k.json")
	if st := run([]string{"-o", out2, r0, bad}, &stdout, &stderr); st != 1 {
		t.Errorf("a bad file: status %d, want 1", st)
	}
	if _, err := os.Stat(out2); err == nil {
		t.Error("a failed merge left its output file")
	}
	if st := run(nil, &stdout, &stderr); st != 2 {
		t.Errorf("no files: status %d, want 2", st)
	}
}
