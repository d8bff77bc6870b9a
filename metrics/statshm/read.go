package statshm

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/tachyon-hpc/tachyon/pvar"
)

// Errors of Open and Read, matched with errors.Is.
var (
	// ErrNotStat: the file is not a tachyonstat file (its magic differs),
	// or is too short to hold a header.
	ErrNotStat = errors.New("statshm: not a tachyonstat file")
	// ErrVersion: the file has a layout version this reader does not know.
	ErrVersion = errors.New("statshm: unknown file version")
	// ErrCorrupt: the file's header or table contradicts itself or the
	// file's size, or the file shrank under the reader.
	ErrCorrupt = errors.New("statshm: corrupt file")
)

// Stat is one reading of a file: the process that publishes it and its
// variables.
type Stat struct {
	Path     string        `json:"path"`
	PID      int           `json:"pid"`
	Rank     int           `json:"rank"` // -1 unknown
	Size     int           `json:"size"` // 0 unknown
	Job      string        `json:"job"`
	Session  string        `json:"session"` // the session's name; "" for a whole process's values
	Host     string        `json:"host"`
	Command  string        `json:"command"`
	Started  time.Time     `json:"started"`
	Updated  time.Time     `json:"updated"`     // the last publication
	Interval time.Duration `json:"interval_ns"` // between publications
	// SecondsPerCount converts the values of timer variables (clock
	// counts) to seconds.
	SecondsPerCount float64 `json:"seconds_per_count"`
	// Stale: the publishing process is certainly gone (no such pid, a
	// zombie, or the pid names a process started later); the values are
	// its last.
	Stale bool `json:"stale"`
	// Consistent: the values are of one publication. False only when the
	// publisher stayed in the middle of one for the whole read (it died
	// there, or was descheduled long); each value is still one the
	// publisher wrote.
	Consistent bool `json:"consistent"`
	// Dropped counts the variables the file has no room for.
	Dropped int   `json:"dropped"`
	Vars    []Var `json:"variables"`
}

// Var is one variable of a Stat.
type Var struct {
	Name  string `json:"name"`
	Class string `json:"class"` // pvar.Class's name: counter, level, highwatermark, ...
	Unit  string `json:"unit,omitempty"`
	Value int64  `json:"value"`
	// State is the name of a state variable's value (the names
	// pvar.NewState gave it); "" for a variable of another class, for a
	// state variable's -1 (nothing is in any state), and for a value the
	// file names no state for.
	State string `json:"state,omitempty"`
}

// Reader reads one file. It maps the file read-only and reads it with
// atomic loads alone: it takes no lock and makes no call the publisher
// could wait on, so reading never slows the job. A Reader is not safe for
// concurrent use.
type Reader struct {
	path     string
	mem      []byte
	dev, ino uint64 // the file's identity when opened
	hdr      Stat   // the fields that never change
	cap      int
	states   int        // offset of the states region; 0 for a file without one
	vars     []Var      // descriptors parsed so far; they never change once published
	names    [][]string // by descriptor: a state variable's names of its values
}

// Open maps the file at path and checks its header. Errors match
// ErrNotStat, ErrVersion or ErrCorrupt for files that are not valid
// tachyonstat files, or are the file system's.
func Open(path string) (_ *Reader, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: %s is not a regular file", ErrNotStat, path)
	}
	if fi.Size() < headerSize {
		return nil, fmt.Errorf("%w: %s has %d bytes, less than a header", ErrNotStat, path, fi.Size())
	}
	hdrMem, err := mapFile(f, headerSize, false)
	if err != nil {
		return nil, err
	}
	r := &Reader{path: path, mem: hdrMem}
	r.dev, r.ino = fileID(fi)
	defer func() {
		if err != nil {
			unmap(r.mem)
		}
	}()
	capacity, states, err := r.header()
	if err != nil {
		return nil, err
	}
	size := statesOff(capacity) // a file without a states region ends there
	if states != 0 {
		size = fileSize(capacity)
	}
	if need := int64(size); fi.Size() < need {
		return nil, fmt.Errorf("%w: %s has %d bytes, its table of %d needs %d", ErrCorrupt, path, fi.Size(), capacity, need)
	}
	mem, err := mapFile(f, size, false)
	if err != nil {
		return nil, err
	}
	unmap(r.mem)
	r.mem, r.cap, r.states = mem, capacity, states
	return r, nil
}

// header checks the header in r.mem and fills r.hdr; it returns the table's
// capacity and the offset of the states region (0 for none).
func (r *Reader) header() (capacity, states int, err error) {
	defer catchFault(debug.SetPanicOnFault(true), &err, r.path)
	mem := r.mem
	if string(mem[offMagic:offMagic+len(magic)]) != magic {
		return 0, 0, fmt.Errorf("%w: %s", ErrNotStat, r.path)
	}
	if v := load(mem, offVersion); v != version {
		return 0, 0, fmt.Errorf("%w: %s has version %d, this reader knows %d", ErrVersion, r.path, v, version)
	}
	hs, ds, c := load(mem, offHeaderSize), load(mem, offDescSize), load(mem, offCapacity)
	if hs != headerSize || ds != descSize || c < 1 || c > maxCapacity {
		return 0, 0, fmt.Errorf("%w: %s: header size %d, descriptor size %d, capacity %d", ErrCorrupt, r.path, hs, ds, c)
	}
	pid := load(mem, offPID)
	if pid > math.MaxInt32 {
		return 0, 0, fmt.Errorf("%w: %s: pid %d", ErrCorrupt, r.path, pid)
	}
	r.hdr = Stat{
		Path:            r.path,
		PID:             int(pid),
		Rank:            int(max(int64(load(mem, offRank)), -1)),
		Size:            int(max(int64(load(mem, offSize)), 0)),
		Job:             cleanString(mem, offJob, jobLen),
		Session:         cleanString(mem, offSession, sessionLen),
		Host:            cleanString(mem, offHost, hostLen),
		Command:         cleanString(mem, offCommand, commandLen),
		Started:         time.Unix(0, int64(load(mem, offStarted))),
		Interval:        time.Duration(load(mem, offInterval)),
		SecondsPerCount: math.Float64frombits(load(mem, offSecPerCount)),
	}
	if r.hdr.Rank > maxCapacity*64 || r.hdr.Size > maxCapacity*64 { // far beyond any job
		return 0, 0, fmt.Errorf("%w: %s: rank %d of %d", ErrCorrupt, r.path, r.hdr.Rank, r.hdr.Size)
	}
	switch st := load(mem, offStates); {
	case st == 0:
		return int(c), 0, nil
	case st != uint64(statesOff(int(c))):
		return 0, 0, fmt.Errorf("%w: %s: states region at %d, not after the values", ErrCorrupt, r.path, st)
	}
	return int(c), statesOff(int(c)), nil
}

// cleanString is getString made valid UTF-8.
func cleanString(mem []byte, off, n int) string {
	return strings.ToValidUTF8(getString(mem, off, n), "\uFFFD")
}

// Path returns the path of the file.
func (r *Reader) Path() string { return r.path }

// PID returns the pid of the publishing process.
func (r *Reader) PID() int { return r.hdr.PID }

// retries bounds the attempts of Read at a consistent view.
const retries = 64

// Read returns the file's current values. It retries while the publisher
// is in the middle of a publication, a few times; if that never ends
// (the publisher died in it), it returns the values as they are, with
// Consistent false.
func (r *Reader) Read() (_ *Stat, err error) {
	defer catchFault(debug.SetPanicOnFault(true), &err, r.path)
	if r.mem == nil {
		return nil, fmt.Errorf("statshm: %s: reader closed", r.path)
	}
	mem := r.mem
	vals := valuesOff(r.cap)
	var (
		n          int
		values     []int64
		updated    int64
		dropped    uint64
		consistent bool
	)
	for try := 0; ; try++ {
		s1 := load(mem, offSeq)
		c := load(mem, offCount)
		if c > uint64(r.cap) {
			return nil, fmt.Errorf("%w: %s: %d variables in a table of %d", ErrCorrupt, r.path, c, r.cap)
		}
		n = int(c)
		values = slices.Grow(values[:0], n)[:n]
		for i := range values {
			values[i] = int64(load(mem, vals+8*i))
		}
		updated, dropped = int64(load(mem, offUpdated)), load(mem, offDropped)
		if s1&1 == 0 && load(mem, offSeq) == s1 {
			consistent = true
			break
		}
		if try == retries {
			break
		}
		if try < retries/2 {
			runtime.Gosched()
		} else {
			time.Sleep(50 * time.Microsecond)
		}
	}
	for i := len(r.vars); i < n; i++ {
		d := headerSize + i*descSize
		v := Var{Name: cleanString(mem, d+descName, nameLen), Unit: cleanString(mem, d+descUnit, unitLen)}
		class := int64(load(mem, d+descClass))
		if v.Name == "" || class < 0 || class > math.MaxInt32 {
			return nil, fmt.Errorf("%w: %s: descriptor %d: name %q, class %d", ErrCorrupt, r.path, i, v.Name, class)
		}
		v.Class = pvar.Class(class).String()
		var names []string
		if pvar.Class(class) == pvar.ClassState && r.states != 0 {
			names = getStates(mem, r.states+i*statesLen)
		}
		r.vars = append(r.vars, v)
		r.names = append(r.names, names)
	}
	st := r.hdr
	st.Updated = time.Unix(0, updated)
	st.Consistent = consistent
	st.Dropped = int(min(dropped, math.MaxInt32))
	st.Stale = gone(st.PID, load(mem, offProcStart), load(mem, offPIDNS))
	st.Vars = make([]Var, n)
	for i := range n {
		st.Vars[i] = r.vars[i]
		st.Vars[i].Value = values[i]
		if names := r.names[i]; values[i] >= 0 && values[i] < int64(len(names)) {
			st.Vars[i].State = names[values[i]]
		}
	}
	return &st, nil
}

// Close unmaps the file.
func (r *Reader) Close() error {
	if r.mem == nil {
		return nil
	}
	err := unmap(r.mem)
	r.mem = nil
	return err
}

// catchFault, deferred with the result of debug.SetPanicOnFault(true)
// at the start of a function that reads the mapping, restores the
// goroutine's setting and turns a fault on the mapping (the file shrank
// under the reader: SIGBUS) into an ErrCorrupt error in *err.
func catchFault(old bool, err *error, path string) {
	debug.SetPanicOnFault(old)
	if e := recover(); e != nil {
		if f, ok := e.(interface{ Addr() uintptr }); ok { // a fault, not a bug of this package
			*err = fmt.Errorf("%w: %s shrank under the reader (%v)", ErrCorrupt, path, f)
			return
		}
		panic(e)
	}
}

// List returns the paths of the tachyonstat files in dir, sorted.
func List(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var paths []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), Prefix) && e.Type().IsRegular() {
			paths = append(paths, filepath.Join(dir, e.Name()))
		}
	}
	return paths, nil
}

// ReadFile opens, reads and closes the file at path.
func ReadFile(path string) (*Stat, error) {
	r, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return r.Read()
}

// RemoveStale removes the files in dir whose publishers are certainly gone
// (Stat.Stale) and returns their paths. Files that are not valid
// tachyonstat files are left alone.
func RemoveStale(dir string) ([]string, error) {
	paths, err := List(dir)
	if err != nil {
		return nil, err
	}
	var removed []string
	var errs []error
	for _, path := range paths {
		ok, err := removeIfStale(path)
		if ok {
			removed = append(removed, path)
		} else if err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return removed, errors.Join(errs...)
}

// removeIfStale removes the file at path if it is stale and still the
// file that was read (a new process with the same pid replaces it whole).
func removeIfStale(path string) (bool, error) {
	r, err := Open(path)
	if err != nil {
		return false, nil // not ours to judge
	}
	defer r.Close()
	st, err := r.Read()
	if err != nil || !st.Stale {
		return false, nil
	}
	fi, err := os.Stat(path)
	if err != nil {
		return false, err
	}
	if dev, ino := fileID(fi); dev != r.dev || ino != r.ino {
		return false, nil
	}
	return true, os.Remove(path)
}
