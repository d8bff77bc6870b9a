package trace

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// Merge writes one trace to w, in the trace event format's object form
// ({"traceEvents":[...]}), holding the events of files in order: each a
// JSON array of trace events, as ranks write them (RankFile). An array
// cut short after a whole event (a rank that stopped before Finalize) is
// taken as it is; anything else that is not an array of JSON objects is
// an error naming the file, and then what was written to w is not a
// whole trace. Events are copied one at a time, not read whole.
func Merge(w io.Writer, files ...string) error {
	bw := bufio.NewWriter(w)
	bw.WriteString(`{"displayTimeUnit":"ns","traceEvents":[`)
	first := true
	for _, name := range files {
		if err := copyEvents(bw, name, &first); err != nil {
			return fmt.Errorf("trace: %s: %w", name, err)
		}
	}
	bw.WriteString("\n]}\n")
	return bw.Flush()
}

// errNotEvents reports a file that is not an array of trace events.
var errNotEvents = errors.New("not a JSON array of trace events")

// copyEvents copies the events of the file name to w, each after a comma
// but the first of all (*first).
func copyEvents(w *bufio.Writer, name string, first *bool) error {
	f, err := os.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	dec := json.NewDecoder(bufio.NewReader(f))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('[') {
		if err == nil || err == io.EOF {
			err = errNotEvents
		}
		return err
	}
	var ev json.RawMessage
	for dec.More() {
		if err := dec.Decode(&ev); err != nil {
			return err
		}
		if len(ev) == 0 || ev[0] != '{' {
			return errNotEvents
		}
		if !*first {
			w.WriteByte(',')
		}
		*first = false
		w.WriteByte('\n')
		w.Write(ev)
	}
	switch tok, err := dec.Token(); {
	case err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF):
		return nil // cut short after a whole event
	case err != nil:
		return err
	case tok != json.Delim(']'):
		return errNotEvents
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("%w: more after the array", errNotEvents)
	}
	return nil
}

// MergeFiles merges the files of ranks 0 to ranks-1 of the trace that
// goes to path (RankFile) into path, and removes them once path is
// written. path is replaced only by a whole trace: the merge goes to a
// temporary file beside it first. It fails if ranks < 1 or a rank's file
// is missing or malformed, and then leaves every rank's file.
func MergeFiles(path string, ranks int) error {
	if ranks < 1 {
		return fmt.Errorf("trace: merging %d ranks", ranks)
	}
	files := make([]string, ranks)
	for r := range files {
		files[r] = RankFile(path, r)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".trace-*.json")
	if err != nil {
		return fmt.Errorf("trace: %w", err)
	}
	defer os.Remove(tmp.Name()) // after a successful rename, nothing
	if err := Merge(tmp, files...); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return fmt.Errorf("trace: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("trace: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("trace: %w", err)
	}
	var first error
	for _, f := range files {
		if err := os.Remove(f); err != nil && first == nil {
			first = fmt.Errorf("trace: %w", err)
		}
	}
	return first
}
