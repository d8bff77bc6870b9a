package statshm

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tachyon-hpc/tachyon/progress"
	"github.com/tachyon-hpc/tachyon/pvar"
)

// Prefix starts the name of every file: Prefix, the publishing process's
// pid, '-', and the number of publishers the process started before this
// one (0 for the first), as in tachyon-stat-4242-0.
const Prefix = "tachyon-stat-"

// DefaultCapacity is the least number of variables a file's table holds.
// Start makes room for twice the variables registered at the time, and at
// least this many, for packages that register theirs later.
const DefaultCapacity = 512

// Config describes the process a Publisher publishes for. Zero values of
// the optional fields take the control variables' values.
type Config struct {
	Job  string // the job's name (its segment, or its PMI name space); "" for none
	Rank int    // world rank; -1 unknown
	Size int    // ranks in the job; 0 unknown

	// Session names the session whose values the file holds (an mpi
	// session's name), "" for a whole process's; cut to 24 bytes.
	Session string
	// Owners, if set, returns the owners of the ranks whose values the
	// file holds (a session's endpoints), asked at every publication.
	// A variable bound to communicators (pvar.BindComm) then holds what
	// those owners counted together, and what owners that have left the
	// list since Start counted (for counters, aggregates, timers and
	// watermarks, which keep it: a value never goes back when a
	// connection closes); every other variable holds the process's
	// value. Nil: every variable holds the process's value.
	Owners func() []*pvar.Owner

	Dir      string        // directory of the file; "" for metrics_stat_dir
	Interval time.Duration // between two publications; 0 for metrics_stat_interval
	Capacity int           // variables the table holds; 0 for the default (see DefaultCapacity)
}

// A Publisher copies every performance variable of the process (pvar.All)
// into its file every interval, from a goroutine of its own, until Stop.
// Variables registered after Start are added to the table at the next
// publication, while it has room; those that do not fit are counted in
// the header (Stat.Dropped).
type Publisher struct {
	path     string
	mem      []byte
	capacity int
	dev, ino uint64 // the file's, so that Stop never removes another

	mu      sync.Mutex     // one publication at a time; Stop
	index   map[string]int // slot of each published variable, by name
	vars    []*pvar.Var    // by slot
	dropped map[string]bool
	scratch []int64

	owners func() []*pvar.Owner // Config.Owners
	live   []*pvar.Owner        // the owners of the last publication
	gone   []int64              // by slot: what owners no longer listed counted
	per    []int64              // ReadSplit's scratch

	stop chan struct{}
	done chan struct{}
	once sync.Once
	err  error
}

var started atomic.Int64 // publishers this process has started

// Start makes the file of this process under cfg.Dir (created anew; a
// file of a process that had the same pid is replaced), fills it with the
// variables' current values, and starts publishing every interval. The
// file appears whole: it is filled under a temporary name first. The
// caller must call Stop, which removes the file.
func Start(cfg Config) (*Publisher, error) {
	dir := cfg.Dir
	if dir == "" {
		dir = dirVar.Get()
	}
	every := cfg.Interval
	if every == 0 {
		every = interval.Get()
	}
	if every < 0 {
		return nil, fmt.Errorf("statshm: negative interval %v", every)
	}
	capacity := cfg.Capacity
	if capacity == 0 {
		capacity = max(DefaultCapacity, 2*len(pvar.All()))
	}
	if capacity < 1 || capacity > maxCapacity {
		return nil, fmt.Errorf("statshm: capacity %d is not in [1, %d]", capacity, maxCapacity)
	}
	rank, size := cfg.Rank, cfg.Size
	if rank < -1 {
		rank = -1
	}
	size = max(size, 0)

	pid := os.Getpid()
	name := Prefix + strconv.Itoa(pid) + "-" + strconv.FormatInt(started.Add(1)-1, 10)
	path := filepath.Join(dir, name)
	tmp := filepath.Join(dir, "."+name+".tmp")
	f, err := create(tmp)
	if err != nil {
		return nil, fmt.Errorf("statshm: %w", err)
	}
	defer f.Close() // the mapping stays
	fail := func(err error) (*Publisher, error) {
		os.Remove(tmp)
		return nil, fmt.Errorf("statshm: %w", err)
	}
	if err := f.Truncate(int64(fileSize(capacity))); err != nil {
		return fail(err)
	}
	mem, err := mapFile(f, fileSize(capacity), true)
	if err != nil {
		return fail(err)
	}
	p := &Publisher{path: path, mem: mem, capacity: capacity, index: make(map[string]int),
		dropped: make(map[string]bool), owners: cfg.Owners, stop: make(chan struct{}), done: make(chan struct{})}
	if fi, err := f.Stat(); err == nil {
		p.dev, p.ino = fileID(fi)
	}

	procStart, pidNS := selfIdentity()
	host, _ := os.Hostname()
	copy(mem[offMagic:], magic)
	store(mem, offVersion, version)
	store(mem, offHeaderSize, headerSize)
	store(mem, offDescSize, descSize)
	store(mem, offCapacity, uint64(capacity))
	store(mem, offPID, uint64(pid))
	store(mem, offProcStart, procStart)
	store(mem, offPIDNS, pidNS)
	store(mem, offRank, uint64(int64(rank)))
	store(mem, offSize, uint64(int64(size)))
	store(mem, offStarted, uint64(time.Now().UnixNano()))
	store(mem, offInterval, uint64(every))
	store(mem, offSecPerCount, math.Float64bits(progress.CountsToSeconds(1)))
	store(mem, offStates, uint64(statesOff(capacity)))
	putString(mem, offJob, jobLen, cfg.Job)
	putString(mem, offSession, sessionLen, cfg.Session)
	putString(mem, offHost, hostLen, host)
	putString(mem, offCommand, commandLen, filepath.Base(os.Args[0]))
	p.publish()
	if err := os.Rename(tmp, path); err != nil {
		unmap(mem)
		return fail(err)
	}
	go p.run(every)
	return p, nil
}

// create makes the file at path anew, readable and writable by its owner
// alone (0600, as the job's own segments are: the values say what the
// job does). It never opens what is there already: a leftover of a
// process that had this pid, or anything planted in a shared directory
// such as /dev/shm (a link to another file), is removed first, which in a
// sticky directory only its owner can do.
func create(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
		f, err = os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	}
	return f, err
}

// Path returns the file's path.
func (p *Publisher) Path() string { return p.path }

// run publishes every interval until Stop.
func (p *Publisher) run(every time.Duration) {
	defer close(p.done)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
			p.publish()
		}
	}
}

// publish adds the variables registered since the last publication to the
// table and copies every value into the file. The values are read first,
// so that the sequence is odd only while they are stored: a reader that
// finds the same even sequence before and after its reads saw one
// publication whole.
func (p *Publisher) publish() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mem == nil {
		return
	}
	var fresh []*pvar.Var
	for _, v := range pvar.All() {
		if _, ok := p.index[v.Name()]; !ok && !p.dropped[v.Name()] {
			fresh = append(fresh, v)
		}
	}
	for _, v := range fresh {
		if len(p.vars) == p.capacity || len(v.Name()) > nameLen {
			p.dropped[v.Name()] = true
			continue
		}
		p.index[v.Name()] = len(p.vars)
		p.vars = append(p.vars, v)
	}
	p.readValues()

	mem := p.mem
	seq := load(mem, offSeq)
	store(mem, offSeq, seq+1) // odd: writing
	published := int(load(mem, offCount))
	for i := published; i < len(p.vars); i++ { // descriptors before the count that publishes them
		v, d := p.vars[i], headerSize+i*descSize
		putString(mem, d+descName, nameLen, v.Name())
		putString(mem, d+descUnit, unitLen, v.Unit())
		store(mem, d+descClass, uint64(v.Class()))
		if names := v.States(); names != nil {
			putStates(mem, statesOff(p.capacity)+i*statesLen, names)
		}
	}
	vals := valuesOff(p.capacity)
	for i, x := range p.scratch {
		store(mem, vals+8*i, uint64(x))
	}
	store(mem, offCount, uint64(len(p.vars)))
	store(mem, offDropped, uint64(len(p.dropped)))
	store(mem, offUpdated, uint64(time.Now().UnixNano()))
	store(mem, offSeq, seq+2) // even: whole
}

// readValues reads every published variable into p.scratch, by slot:
// the process's values, or the owners' (Config.Owners).
func (p *Publisher) readValues() {
	p.scratch = p.scratch[:0]
	if p.owners == nil {
		for _, v := range p.vars {
			p.scratch = append(p.scratch, v.Read())
		}
		return
	}
	for len(p.gone) < len(p.vars) {
		p.gone = append(p.gone, identity(p.vars[len(p.gone)]))
	}
	owners := p.owners()
	p.retire(owners)
	p.per = slices.Grow(p.per[:0], len(owners))[:len(owners)]
	for i, v := range p.vars {
		if v.Bind() != pvar.BindComm {
			p.scratch = append(p.scratch, v.Read())
			continue
		}
		x := p.gone[i]
		v.ReadSplit(owners, p.per)
		for _, y := range p.per {
			x = v.Merge(x, y)
		}
		p.scratch = append(p.scratch, x)
	}
}

// retire folds into p.gone what the owners of the last publication that
// owners no longer lists counted, for the variables that keep it, and
// makes owners the last publication's.
func (p *Publisher) retire(owners []*pvar.Owner) {
	now := make(map[*pvar.Owner]bool, len(owners))
	for _, o := range owners {
		now[o] = true
	}
	var left []*pvar.Owner
	for _, o := range p.live {
		if !now[o] {
			left = append(left, o)
		}
	}
	p.live = append(p.live[:0], owners...)
	if len(left) == 0 {
		return
	}
	per := make([]int64, len(left))
	for i, v := range p.vars {
		if v.Bind() != pvar.BindComm || !keeps(v.Class()) {
			continue
		}
		v.ReadSplit(left, per)
		for _, y := range per {
			p.gone[i] = v.Merge(p.gone[i], y)
		}
	}
}

// keeps reports whether a variable of class c keeps what an owner counted
// after the owner's rank closed: the levels and states of a closed rank
// are gone with it.
func keeps(c pvar.Class) bool {
	switch c {
	case pvar.ClassCounter, pvar.ClassAggregate, pvar.ClassTimer, pvar.ClassHighWatermark, pvar.ClassLowWatermark:
		return true
	}
	return false
}

// identity is the value of v for no owner: what Merge leaves unchanged.
func identity(v *pvar.Var) int64 {
	switch v.Class() {
	case pvar.ClassLowWatermark:
		return math.MaxInt64
	case pvar.ClassState:
		return -1 // no state
	}
	return 0
}

// Stop stops publishing, removes the file (unless another file has taken
// its name since) and unmaps it. It is safe to call more than once, and
// returns the first call's error.
func (p *Publisher) Stop() error {
	p.once.Do(func() {
		close(p.stop)
		<-p.done
		p.mu.Lock()
		defer p.mu.Unlock()
		var errs []error
		if fi, err := os.Stat(p.path); err == nil {
			if dev, ino := fileID(fi); dev == p.dev && ino == p.ino {
				if err := os.Remove(p.path); err != nil && !errors.Is(err, os.ErrNotExist) {
					errs = append(errs, err)
				}
			}
		}
		if err := unmap(p.mem); err != nil {
			errs = append(errs, err)
		}
		p.mem = nil
		if err := errors.Join(errs...); err != nil {
			p.err = fmt.Errorf("statshm: stopping: %w", err)
		}
	})
	return p.err
}
