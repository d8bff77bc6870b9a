// Package trace records a Tachyon job's calls as a Chrome trace, in the
// trace event format that Perfetto (ui.perfetto.dev) and chrome://tracing
// open: one track per rank, named "rank N", and on it one complete event
// ("ph":"X") per call of the facade, with the routine's name, its start
// and duration in microseconds, and as arguments the peer, tag and bytes
// of the call where it has them (for a receive or probe that found a
// message, the status's source, tag and size), Sendrecv's receive side,
// the communicator's name, the number of requests of a Wait or Test, and
// the error of a call that failed. The whole job is one process of the
// trace (pid 1), the rank its thread (tid).
//
// It is built on the interception API (mpi.Intercept):
//
//	t, err := trace.Install("/tmp/job.json")
//	if err != nil { ... }
//	defer t.Remove()
//	... // the program: mpi.Main, or Init ... Finalize
//	if err := t.Err(); err != nil { ... }
//
// Each rank of the process writes its events to a file of its own,
// RankFile(path, rank) (/tmp/job.0.json, ...), so that the ranks of a job
// of processes, started by tachyonrun or another launcher, write without
// coordinating. A rank buffers its events, encoded, in memory and writes
// them to its file whenever the buffer passes 64 KiB, and at Pcontrol(2)
// (Tracer.Flush); encoding appends to the rank's buffer and allocates
// nothing. When the rank calls Finalize, before Finalize goes on, the
// rank writes what is left and closes its file. Finalize waits for every
// rank to enter it, so when it returns on rank 0 every rank's file is
// complete: rank 0 then merges them into path (MergeFiles) and removes
// them. It merges as many ranks as the communicator Finalize was called
// through has: call Finalize, or the world's Comm.Finalize. A job that does not reach Finalize leaves its rank files, which
// Merge joins into one trace (the files of ranks that stopped early end
// without their closing bracket; Merge and the viewers accept that).
//
// mpi.Pcontrol(0) stops recording and Pcontrol(1) resumes it, for the
// whole process (MPI's Pcontrol acts on a process; the ranks of an
// in-process world share theirs); Pcontrol(2) flushes every rank's
// buffer to its file.
//
// Timestamps are the wall clock's, in microseconds since 2026-01-01 00:00 UTC, so the
// ranks of a job on one host line up (and, as far as their clocks agree,
// across hosts); durations are the monotonic clock's. An epoch near the
// present keeps the float64 a viewer reads a timestamp into exact to a
// few nanoseconds, where microseconds since 1970 would round to a
// quarter of one. A Tracer traces one job: calls
// a rank makes after its Finalize are not recorded. It is safe for
// concurrent use by the ranks of an in-process world and by the
// goroutines of one rank.
//
// docs/tools.md describes the tracer, its output and cmd/tachyontrace.
package trace

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/tachyon-hpc/tachyon/mpi"
)

// jobPID is the trace's process id of the job: every rank's events are
// threads of one process.
const jobPID = 1

// epoch is the time a trace's timestamps count from.
var epoch = time.Date(2026, time.January, 1, 0, 0, 0, 0, time.UTC)

// epochNanos is epoch in nanoseconds since 1970.
var epochNanos = epoch.UnixNano()

// flushBytes is the size of a rank's buffer at which it is written out.
const flushBytes = 64 << 10

// Tracer records the calls of every rank of this process. Install makes
// one.
type Tracer struct {
	path   string
	remove func() error
	off    atomic.Bool // Pcontrol(0)

	mu    sync.Mutex                 // serializes growing ranks
	ranks atomic.Pointer[[]*rankLog] // indexed by rank, nil where not seen

	errMu sync.Mutex
	err   error
}

// rankLog is one rank's events: those not yet written, encoded, and the
// file they go to.
type rankLog struct {
	mu     sync.Mutex
	rank   int
	buf    []byte
	f      *os.File // nil until the first write
	failed bool     // a write failed: the rank records no more
	closed bool     // Finalize closed the file
}

// Install starts tracing every rank of this process into path (the merged
// trace) and RankFile(path, rank) (each rank's part). It fails if path is
// empty or a directory, or its directory does not exist; files are made
// when ranks first write.
func Install(path string) (*Tracer, error) {
	if path == "" {
		return nil, errors.New("trace: no file named")
	}
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return nil, fmt.Errorf("trace: %s is a directory", path)
	}
	if fi, err := os.Stat(filepath.Dir(path)); err != nil {
		return nil, fmt.Errorf("trace: %w", err)
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("trace: %s is not a directory", filepath.Dir(path))
	}
	t := &Tracer{path: path}
	var err error
	if t.remove, err = mpi.Intercept(t.intercept); err != nil {
		return nil, err
	}
	return t, nil
}

// Remove stops tracing (a second time does nothing). Like mpi.Intercept's
// remove, it fails while MPI runs. It writes nothing: files of ranks that
// have not finalized stay as they are, without their last events; call
// Flush first to keep those.
func (t *Tracer) Remove() error { return t.remove() }

// Err returns the first error writing or merging the trace files, nil if
// none.
func (t *Tracer) Err() error {
	t.errMu.Lock()
	defer t.errMu.Unlock()
	return t.err
}

func (t *Tracer) fail(err error) {
	t.errMu.Lock()
	defer t.errMu.Unlock()
	if t.err == nil {
		t.err = err
	}
}

// Flush writes the events every rank has buffered to its file, as
// Pcontrol(2) does, and returns the first error.
func (t *Tracer) Flush() error {
	var first error
	if s := t.ranks.Load(); s != nil {
		for _, l := range *s {
			if l == nil {
				continue
			}
			l.mu.Lock()
			err := t.write(l)
			l.mu.Unlock()
			if err != nil && first == nil {
				first = err
			}
		}
	}
	return first
}

// RankFile returns the file rank writes its events to when the trace goes
// to path: path without its extension ".json", then "." and the rank and
// ".json" (/tmp/job.json: /tmp/job.3.json).
func RankFile(path string, rank int) string {
	return strings.TrimSuffix(path, ".json") + "." + strconv.Itoa(rank) + ".json"
}

// rank returns rank r's log, made on first use; nil for a rank below 0.
func (t *Tracer) rank(r int) *rankLog {
	if r < 0 {
		return nil
	}
	if s := t.ranks.Load(); s != nil && r < len(*s) && (*s)[r] != nil {
		return (*s)[r]
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	var next []*rankLog
	if s := t.ranks.Load(); s != nil {
		if r < len(*s) && (*s)[r] != nil {
			return (*s)[r]
		}
		next = slices.Clone(*s)
	}
	if r >= len(next) {
		next = append(next, make([]*rankLog, r+1-len(next))...)
	}
	l := &rankLog{rank: r, buf: make([]byte, 0, flushBytes+4096)}
	l.buf = appendMetadata(l.buf, r)
	next[r] = l
	t.ranks.Store(&next)
	return l
}

func (t *Tracer) intercept(call *mpi.Call, next mpi.Handler) error {
	switch call.Op {
	case mpi.OpPcontrol:
		switch call.Level {
		case 0:
			t.off.Store(true)
		case 1:
			t.off.Store(false)
		case 2:
			if err := t.Flush(); err != nil {
				t.fail(err)
			}
		}
		return next(call)
	case mpi.OpFinalize:
		return t.finalize(call, next)
	}
	if t.off.Load() || (call.Rank < 0 && call.Op != mpi.OpInit) {
		return next(call)
	}
	start := time.Now()
	err := next(call)
	d := time.Since(start)
	rank := call.Rank
	if call.Op == mpi.OpInit && err == nil {
		if w := mpi.World(); w != nil {
			rank = w.Rank()
		}
	}
	if l := t.rank(rank); l != nil {
		l.mu.Lock()
		if !l.closed && !l.failed {
			l.buf = appendEvent(l.buf, call, err, start, d, rank)
			if len(l.buf) >= flushBytes {
				if err := t.write(l); err != nil {
					t.fail(err)
				}
			}
		}
		l.mu.Unlock()
	}
	return err
}

// finalize closes the rank's file before Finalize goes on and, on rank 0,
// merges every rank's file into the trace once Finalize has returned:
// Finalize returns on no rank before every rank has entered it, so every
// file is closed by then.
//
// The job's size is that of the communicator Finalize is called through
// (Comm.Finalize), or of the world (Finalize).
func (t *Tracer) finalize(call *mpi.Call, next mpi.Handler) error {
	rank, size := call.Rank, 0
	if call.Comm != nil {
		size = call.Comm.Size()
	} else if w := mpi.World(); w != nil {
		size = w.Size()
		if rank < 0 {
			rank = w.Rank()
		}
	}
	if rank < 0 {
		return next(call)
	}
	l := t.rank(rank)
	l.mu.Lock()
	if !l.closed {
		if err := t.close(l); err != nil {
			t.fail(err)
		}
	}
	l.mu.Unlock()
	err := next(call)
	if rank == 0 && err == nil && size > 0 {
		if err := MergeFiles(t.path, size); err != nil {
			t.fail(err)
		}
	}
	return err
}

// write writes l's buffer to its file, opening it first if need be. Under
// l.mu.
func (t *Tracer) write(l *rankLog) error {
	if l.failed || l.closed || len(l.buf) == 0 {
		return nil
	}
	if l.f == nil {
		f, err := os.Create(RankFile(t.path, l.rank))
		if err != nil {
			l.failed, l.buf = true, nil
			return fmt.Errorf("trace: rank %d: %w", l.rank, err)
		}
		l.f = f
	}
	if _, err := l.f.Write(l.buf); err != nil {
		l.failed, l.buf = true, nil
		l.f.Close()
		return fmt.Errorf("trace: rank %d: %w", l.rank, err)
	}
	l.buf = l.buf[:0]
	return nil
}

// close writes the rest of l's events and the end of the array, and
// closes the file. Under l.mu.
func (t *Tracer) close(l *rankLog) error {
	if l.failed {
		l.closed = true
		return nil
	}
	l.buf = append(l.buf, "\n]\n"...)
	err := t.write(l)
	l.closed = true
	if l.f != nil && !l.failed {
		if cerr := l.f.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("trace: rank %d: %w", l.rank, cerr)
		}
	}
	l.buf = nil
	return err
}

// appendMetadata appends the opening of rank r's array: the events that
// name its track "rank r" and sort it by rank, and on rank 0 the event
// that names the job's process after the program.
func appendMetadata(b []byte, r int) []byte {
	b = append(b, "[\n"...)
	b = append(b, `{"name":"thread_name","ph":"M","pid":1,"tid":`...)
	b = strconv.AppendInt(b, int64(r), 10)
	b = append(b, `,"args":{"name":"rank `...)
	b = strconv.AppendInt(b, int64(r), 10)
	b = append(b, `"}},`+"\n"+`{"name":"thread_sort_index","ph":"M","pid":1,"tid":`...)
	b = strconv.AppendInt(b, int64(r), 10)
	b = append(b, `,"args":{"sort_index":`...)
	b = strconv.AppendInt(b, int64(r), 10)
	b = append(b, "}}"...)
	if r == 0 {
		b = append(b, ",\n"+`{"name":"process_name","ph":"M","pid":1,"args":{"name":`...)
		b = appendString(b, filepath.Base(os.Args[0])+" (Tachyon job)")
		b = append(b, "}}"...)
	}
	return b
}

// appendEvent appends ",\n" and the complete event of call, which
// returned res after d from start, on rank's track.
func appendEvent(b []byte, call *mpi.Call, err error, start time.Time, d time.Duration, rank int) []byte {
	res := &call.Result
	b = append(b, ",\n"+`{"name":`...)
	b = appendString(b, call.Op.String())
	b = append(b, `,"cat":"mpi","ph":"X","ts":`...)
	b = appendMicros(b, start.UnixNano()-epochNanos)
	b = append(b, `,"dur":`...)
	b = appendMicros(b, int64(d))
	b = append(b, `,"pid":1,"tid":`...)
	b = strconv.AppendInt(b, int64(rank), 10)
	b = append(b, `,"args":{`...)
	n := len(b)
	arg := func(name string, v int) {
		if len(b) > n {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = append(b, name...)
		b = append(b, `":`...)
		b = strconv.AppendInt(b, int64(v), 10)
	}
	ok := err == nil
	if call.Peer != mpi.Undefined {
		peer, tag, bytes := call.Peer, call.Tag, call.Bytes
		switch call.Op {
		case mpi.OpRecv, mpi.OpRecvLayout, mpi.OpProbe:
			if ok {
				peer, tag, bytes = res.Status.Source, res.Status.Tag, res.Status.Count
			}
		case mpi.OpIprobe:
			if ok && res.Flag {
				peer, tag, bytes = res.Status.Source, res.Status.Tag, res.Status.Count
			}
		}
		arg("peer", peer)
		arg("tag", tag)
		arg("bytes", bytes)
	}
	if call.RecvPeer != mpi.Undefined {
		peer, tag, bytes := call.RecvPeer, call.RecvTag, -1
		if ok {
			peer, tag, bytes = res.Status.Source, res.Status.Tag, res.Status.Count
		}
		arg("recv_peer", peer)
		arg("recv_tag", tag)
		if bytes >= 0 {
			arg("recv_bytes", bytes)
		}
	}
	if call.Request != nil {
		arg("requests", 1)
	} else if len(call.Requests) > 0 {
		arg("requests", len(call.Requests))
	}
	if call.Comm != nil {
		if name := call.Comm.Name(); name != "" {
			if len(b) > n {
				b = append(b, ',')
			}
			b = append(b, `"comm":`...)
			b = appendString(b, name)
		}
	}
	if !ok {
		if len(b) > n {
			b = append(b, ',')
		}
		b = append(b, `"error":`...)
		b = appendString(b, err.Error())
	}
	return append(b, "}}"...)
}

// appendMicros appends ns nanoseconds as microseconds with three
// decimals.
func appendMicros(b []byte, ns int64) []byte {
	if ns < 0 {
		b = append(b, '-')
		ns = -ns
	}
	b = strconv.AppendInt(b, ns/1000, 10)
	frac := ns % 1000
	return append(b, '.', byte('0'+frac/100), byte('0'+frac/10%10), byte('0'+frac%10))
}

// appendString appends s as a JSON string.
func appendString(b []byte, s string) []byte {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c < 0x20:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}
