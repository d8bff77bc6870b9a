// Package launch runs a Tachyon job of several processes on one host: the
// library behind cmd/tachyonrun and the benchmark program.
//
// Run, step by step:
//
//  1. Check the configuration and find the program, before creating
//     anything.
//  2. Remove the segments of dead jobs (rings.RemoveStale on the prefix)
//     and create this job's shared-memory segment under a unique name.
//  3. Start N processes of the program, one at a time, from one locked
//     OS thread; each gets its rank, the size and the segment name in
//     TACHYON_RANK, TACHYON_SIZE and TACHYON_SEGMENT, runs in its own
//     process group (Windows: a console process group), and dies with
//     the launcher (Linux only: parent-death signal). A rank bound to a
//     CPU is started from the thread while that thread's affinity is set
//     to that CPU alone, so the process inherits the binding from its
//     first instruction: there is no window in which it runs elsewhere.
//  4. Forward each rank's stdout and stderr line by line, each line in
//     one write, optionally prefixed with "[rank] ".
//  5. Wait. The first rank to exit with a non-zero status (or to die by a
//     signal: status 128+signo) sets the job's exit status, and the other
//     ranks get SIGTERM, then SIGKILL after a grace period. Cancelling
//     the context stops the job the same way. Windows can send neither
//     signal, to a rank or to its group: there a rank is terminated at
//     once (os.Process.Kill), and the processes it started are not.
//  6. Remove the segment, on every path.
//
// The segment and CPU binding need Linux; elsewhere Run fails at step 2,
// and a Config with CPUs at step 1, with an error that says so.
//
// docs/launching.md covers the launcher, its guarantees and the jobs across
// hosts.
package launch

import (
	"bufio"
	"context"
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
	"syscall"
	"time"

	"github.com/tachyon-hpc/tachyon/cvar"
	"github.com/tachyon-hpc/tachyon/engine"
	"github.com/tachyon-hpc/tachyon/internal/nethost"
	"github.com/tachyon-hpc/tachyon/pmi"
	"github.com/tachyon-hpc/tachyon/rings"
)

// Environment variables through which a rank learns its place in the job
// (engine's, which mpi's Init reads).
const (
	EnvRank    = engine.EnvRank
	EnvSize    = engine.EnvSize
	EnvSegment = engine.EnvSegment
)

// DefaultSegmentPrefix starts the name of a job's segment when
// Config.SegmentPrefix is empty.
const DefaultSegmentPrefix = "tachyon-job"

// MaxRanks is the largest job Run starts (the shared-memory engine's
// limit).
const MaxRanks = 1 << 12

// ErrConfig is matched (errors.Is) by every error about a Config that
// cannot run.
var ErrConfig = errors.New("launch: invalid configuration")

// Config describes a job.
type Config struct {
	N       int      // number of ranks, at least 1
	Program string   // program to run: a path, or a name looked up in PATH
	Args    []string // its arguments (without the program name)
	Env     []string // extra KEY=VALUE for every rank, over the launcher's environment
	// CPUs binds rank i to CPU CPUs[i%len(CPUs)] (sched_setaffinity,
	// inherited from the launcher's thread at fork, so in force before the
	// program's first instruction). Every CPU must be one the launcher may
	// run on. Nil or empty: no binding.
	CPUs   []int
	Prefix bool // prefix each output line with "[rank] "
	// Stdout and Stderr receive the ranks' output; nil means os.Stdout
	// and os.Stderr. Run writes each line with one Write call while it
	// holds a lock shared by both, so neither needs to be safe for
	// concurrent use.
	Stdout, Stderr io.Writer
	// SegmentPrefix starts the job segment's name (DefaultSegmentPrefix if
	// empty): letters, digits, '-', '_' and '.', not starting with '.'.
	// Stale segments with this prefix, left by jobs whose processes all
	// died, are removed first.
	SegmentPrefix string
	// NetNS makes each rank a host of its own, for tests and
	// demonstrations of jobs across hosts on one machine: its own network
	// namespace, joined to the others' by veth pairs and a bridge that
	// Run makes and removes (addresses in 198.18.0.0/15), its own host
	// name and /dev/shm. The ranks find each other through a PMI-1
	// process manager Run serves (PMI_FD), so that mpi.Init joins them
	// over the network transport. It needs root, and the launching
	// program must call nethost.EnterMain first: it is the shim that puts
	// each rank into its host (cmd/tachyonrun does).
	NetNS bool
	// NetMTU, with NetNS, is the MTU of the hosts' interfaces (0: 1500).
	NetMTU int
	// NetPerHost, with NetNS, is how many ranks share each host (0 or 1:
	// one a host): ranks i*NetPerHost to (i+1)*NetPerHost-1 are host i's,
	// sharing its memory as the ranks of one machine do.
	NetPerHost int
}

// envShmDir sets the ranks' rings_shm_dir, where their host's segments go.
const envShmDir = cvar.EnvPrefix + "RINGS_SHM_DIR"

// Stopping and draining delays; vars for tests.
var (
	killGrace  = 3 * time.Second // from SIGTERM to SIGKILL
	drainGrace = 2 * time.Second // output still read after the last rank exits
)

// beforeStart, when set by a test, runs before rank i starts; its error
// fails that rank's start.
var beforeStart func(rank int) error

// maxLine is the longest output line forwarded whole; longer ones are cut
// into lines of this length.
const maxLine = 1 << 20

var jobSeq atomic.Uint64

// Run runs the job cfg describes and returns its exit status: 0 if every
// rank exited with 0, else the status of the first rank that did not
// (128+signo for a rank killed by a signal). The job's segment is removed
// on every path.
//
// err is not nil when the job could not run as asked: an invalid Config
// (matching ErrConfig), a program that is not found, a segment that
// cannot be created, a rank that cannot be started (the ranks already
// started are stopped), or ctx cancelled (the ranks are stopped; err
// wraps context.Cause(ctx)). exitCode is then never 0.
func Run(ctx context.Context, cfg Config) (exitCode int, err error) {
	path, err := cfg.check()
	if err != nil {
		return 1, err
	}
	if err := context.Cause(ctx); err != nil {
		return 1, fmt.Errorf("launch: job not started: %w", err)
	}
	if cfg.NetNS {
		return runNetNS(ctx, cfg, path)
	}
	prefix := cfg.SegmentPrefix
	if prefix == "" {
		prefix = DefaultSegmentPrefix
	}
	rings.RemoveStale(prefix) // best effort; creation below reports real trouble
	name := fmt.Sprintf("%s-%d-%d-%d", prefix, os.Getpid(), time.Now().UnixNano(), jobSeq.Add(1))
	seg, err := engine.CreateShmJob(name, cfg.N)
	if err != nil {
		return 1, fmt.Errorf("launch: creating the job's shared-memory segment %s: %w", name, err)
	}
	defer func() {
		if e := seg.Remove(); e != nil && err == nil {
			exitCode, err = max(exitCode, 1), fmt.Errorf("launch: removing the job's segment: %w", e)
		}
		seg.Close()
	}()
	j := newJob(cfg, path, name)
	j.seg = seg
	return j.run(ctx)
}

func newJob(cfg Config, path, segment string) *job {
	j := &job{cfg: cfg, path: path, segment: segment, aborts: make(chan abort, cfg.N)}
	j.out.prefix = cfg.Prefix
	j.out.stdout, j.out.stderr = cfg.Stdout, cfg.Stderr
	if j.out.stdout == nil {
		j.out.stdout = os.Stdout
	}
	if j.out.stderr == nil {
		j.out.stderr = os.Stderr
	}
	return j
}

// check validates cfg and returns the program's path.
func (cfg *Config) check() (string, error) {
	if cfg.N < 1 || cfg.N > MaxRanks {
		return "", fmt.Errorf("%w: %d ranks: a job has 1 to %d", ErrConfig, cfg.N, MaxRanks)
	}
	if cfg.Program == "" {
		return "", fmt.Errorf("%w: no program to run", ErrConfig)
	}
	if cfg.NetPerHost < 0 || cfg.NetPerHost > 1 && !cfg.NetNS {
		return "", fmt.Errorf("%w: %d ranks a host: wants NetNS, and at least 1", ErrConfig, cfg.NetPerHost)
	}
	if p := cfg.SegmentPrefix; p != "" {
		if p[0] == '.' || len(p) > 100 || strings.IndexFunc(p, func(r rune) bool {
			return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.')
		}) >= 0 {
			return "", fmt.Errorf("%w: segment prefix %q: use letters, digits, '-', '_' and '.', not starting with '.'", ErrConfig, p)
		}
	}
	for _, kv := range cfg.Env {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
			return "", fmt.Errorf("%w: environment entry %q is not KEY=VALUE", ErrConfig, kv)
		}
	}
	if len(cfg.CPUs) > 0 {
		if err := checkCPUs(cfg.CPUs); err != nil {
			return "", err
		}
	}
	path, err := exec.LookPath(cfg.Program)
	if err != nil {
		return "", fmt.Errorf("launch: program %q: %w", cfg.Program, err)
	}
	return path, nil
}

// job is one run of a Config.
type job struct {
	cfg     Config
	path    string
	segment string
	seg     *rings.Segment // the job's segment, where a rank's Abort is marked (nil with NetNS)
	out     output
	// With NetNS: the hosts, the process manager, this program (the
	// shim), and the ranks' aborts through PMI.
	hosts   []*nethost.Host
	shmDirs []string // by host, with NetPerHost: its ranks' rings_shm_dir
	pm      *pmi.Server
	shim    string
	aborts  chan abort
}

// abort is a rank's PMI abort of the job.
type abort struct {
	rank, code int
	msg        string
}

// rank is one started process.
type rank struct {
	cmd    *exec.Cmd
	exited bool
}

// exit reports a rank's end.
type exit struct {
	rank  int
	state *os.ProcessState
	err   error
}

func (j *job) run(ctx context.Context) (int, error) {
	n := j.cfg.N
	sp := newSpawner()
	defer sp.close()
	ranks := make([]*rank, 0, n)
	exits := make(chan exit, n)
	var readers sync.WaitGroup
	var pipes []*os.File // read ends, for the drain deadline
	var startErr error
	for i := 0; i < n; i++ {
		if err := context.Cause(ctx); err != nil {
			break // the loop below stops the ranks already started
		}
		cmd, rOut, rErr, err := j.command(i)
		if err == nil && beforeStart != nil {
			err = beforeStart(i)
		}
		if err == nil {
			cpu := -1
			if len(j.cfg.CPUs) > 0 {
				cpu = j.cfg.CPUs[i%len(j.cfg.CPUs)]
			}
			err = sp.start(cmd, cpu)
		}
		// The child holds its own copies of the write ends.
		for _, f := range []any{cmd.Stdout, cmd.Stderr} {
			if f, ok := f.(*os.File); ok && f != nil {
				f.Close()
			}
		}
		for _, f := range cmd.ExtraFiles {
			f.Close()
		}
		if err != nil {
			for _, f := range []*os.File{rOut, rErr} {
				if f != nil {
					f.Close()
				}
			}
			startErr = fmt.Errorf("launch: starting rank %d of %d (%s): %w", i, n, j.path, err)
			break
		}
		pipes = append(pipes, rOut, rErr)
		readers.Add(2)
		go j.out.forward(rOut, j.out.stdout, i, &readers)
		go j.out.forward(rErr, j.out.stderr, i, &readers)
		ranks = append(ranks, &rank{cmd: cmd})
		go func(i int) {
			err := cmd.Wait()
			exits <- exit{rank: i, state: cmd.ProcessState, err: err}
		}(i)
	}

	code := 0
	var stopErr error
	stopping := false
	var killTimer <-chan time.Time
	stop := func() {
		stopping = true
		for _, r := range ranks {
			if !r.exited {
				signalGroup(r.cmd.Process, syscall.SIGTERM)
			}
		}
		killTimer = time.After(killGrace)
	}
	if startErr != nil {
		stopErr = startErr
		stop()
	} else if err := context.Cause(ctx); err != nil {
		stopErr = fmt.Errorf("launch: job stopped: %w", err)
		stop()
	}
	done := ctx.Done()
	for left := len(ranks); left > 0; {
		select {
		case a := <-j.aborts:
			if !stopping {
				code = a.code
				if code == 0 {
					code = 1 // an abort is an abort, whatever its code
				}
				j.out.note(fmt.Sprintf("tachyon: rank %d aborted the job with code %d (%s); stopping the others", a.rank, a.code, a.msg))
				stop()
			}
		case e := <-exits:
			left--
			ranks[e.rank].exited = true
			c, how := exitStatus(e.state, e.err)
			if !stopping && j.seg != nil {
				// A rank that called Abort marked the segment: the job
				// ends whatever the code, as for an abort through PMI.
				if r, ac, ok := engine.ShmJobAborted(j.seg); ok {
					c, how = ac, fmt.Sprintf("aborted the job with code %d", ac)
					if r != e.rank {
						how = fmt.Sprintf("exited after rank %d aborted the job with code %d", r, ac)
					}
					if c == 0 {
						c = 1 // an abort is an abort, whatever its code
					}
				}
			}
			if c != 0 && !stopping {
				code = c
				others := ""
				if left > 0 {
					others = fmt.Sprintf("; stopping the other %d rank(s)", left)
				}
				j.out.note(fmt.Sprintf("tachyon: rank %d %s%s", e.rank, how, others))
				stop()
			}
		case <-done:
			done = nil
			if !stopping {
				stopErr = fmt.Errorf("launch: job stopped: %w", context.Cause(ctx))
				stop()
			}
		case <-killTimer:
			killTimer = nil
			for _, r := range ranks {
				if !r.exited {
					signalGroup(r.cmd.Process, syscall.SIGKILL)
				}
			}
		}
	}
	// Every rank has exited; what they wrote is in the pipes unless a
	// process they started still holds them. Read until EOF, or for
	// drainGrace at most.
	drained := make(chan struct{})
	go func() { readers.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(drainGrace):
		for _, p := range pipes {
			p.SetReadDeadline(time.Now())
		}
		<-drained
	}
	if stopErr != nil {
		return max(code, 1), stopErr
	}
	return code, nil
}

// command prepares rank i's process with pipes for its output; with
// NetNS, the shim that enters rank i's host and runs the program there,
// with its PMI connection.
func (j *job) command(i int) (cmd *exec.Cmd, rOut, rErr *os.File, err error) {
	cmd = exec.Command(j.path, j.cfg.Args...)
	cmd.Args[0] = j.cfg.Program
	cmd.Env = j.env(i)
	if j.hosts != nil {
		cmd = exec.Command(j.shim, append([]string{j.path}, j.cfg.Args...)...)
		h := i / max(1, j.cfg.NetPerHost)
		cmd.Env = append(j.env(i), j.hosts[h].EnterEnv(), "PMI_FD=3",
			"PMI_RANK="+strconv.Itoa(i), "PMI_SIZE="+strconv.Itoa(j.cfg.N))
		if j.shmDirs != nil {
			cmd.Env = append(cmd.Env, envShmDir+"="+j.shmDirs[h])
		}
		f, err := j.pm.Attach(i)
		if err != nil {
			return cmd, nil, nil, err
		}
		cmd.ExtraFiles = []*os.File{f}
	}
	cmd.SysProcAttr = sysProcAttr()
	rOut, wOut, err := os.Pipe()
	if err != nil {
		return cmd, nil, nil, err
	}
	rErr, wErr, err := os.Pipe()
	if err != nil {
		rOut.Close()
		wOut.Close()
		return cmd, nil, nil, err
	}
	cmd.Stdout, cmd.Stderr = wOut, wErr
	return cmd, rOut, rErr, nil
}

// env is the launcher's environment without the variables of another
// launcher's job, then cfg.Env, then the rank's place in this job.
func (j *job) env(i int) []string {
	drop := map[string]bool{EnvRank: true, EnvSize: true, EnvSegment: true,
		"PMI_FD": true, "PMI_PORT": true, "PMI_ID": true, "PMI_RANK": true, "PMI_SIZE": true}
	var env []string
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); !drop[k] {
			env = append(env, kv)
		}
	}
	env = append(env, j.cfg.Env...)
	if j.segment == "" {
		return env
	}
	return append(env, EnvRank+"="+strconv.Itoa(i), EnvSize+"="+strconv.Itoa(j.cfg.N), EnvSegment+"="+j.segment)
}

// exitStatus returns a finished process's exit status, 128+signo for a
// signal death, and a phrase that says how it ended.
func exitStatus(st *os.ProcessState, err error) (int, string) {
	if st == nil {
		return 1, fmt.Sprintf("could not be waited for: %v", err)
	}
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal()), fmt.Sprintf("was killed by signal %d (%v)", int(ws.Signal()), ws.Signal())
	}
	c := st.ExitCode()
	if c < 0 {
		return 1, "ended abnormally"
	}
	return c, fmt.Sprintf("exited with status %d", c)
}

// output forwards the ranks' lines; one lock orders every write to
// stdout and stderr.
type output struct {
	mu             sync.Mutex
	prefix         bool
	stdout, stderr io.Writer
}

// forward copies r to w line by line until EOF or an error, then closes r.
func (o *output) forward(r *os.File, w io.Writer, rank int, wg *sync.WaitGroup) {
	defer wg.Done()
	defer r.Close()
	var pre []byte
	if o.prefix {
		pre = []byte("[" + strconv.Itoa(rank) + "] ")
	}
	rd := bufio.NewReaderSize(r, 64<<10)
	var line []byte
	for {
		frag, err := rd.ReadSlice('\n')
		if len(line) == 0 {
			line = append(line, pre...)
		}
		line = append(line, frag...)
		switch {
		case err == nil:
			o.write(w, line)
			line = line[:0]
		case err == bufio.ErrBufferFull:
			if len(line)-len(pre) >= maxLine {
				o.write(w, append(line, '\n'))
				line = line[:0]
			}
		default: // EOF, or the drain deadline: flush a last partial line
			if len(line) > len(pre) {
				o.write(w, append(line, '\n'))
			}
			return
		}
	}
}

func (o *output) write(w io.Writer, b []byte) {
	o.mu.Lock()
	w.Write(b) // an output that fails is not a reason to stop the job
	o.mu.Unlock()
}

// note writes one line of the launcher's own to stderr.
func (o *output) note(s string) { o.write(o.stderr, []byte(s+"\n")) }

// spawner starts processes from one goroutine locked to its OS thread for
// the job's lifetime. The thread's affinity is what a started process
// inherits (see bindThread), and on Linux a rank's parent-death signal
// fires when the thread that started it exits, so that thread must live
// until every rank has ended.
type spawner struct {
	reqs chan spawnReq
	done chan struct{}
}

type spawnReq struct {
	cmd    *exec.Cmd
	cpu    int // -1: no binding
	result chan error
}

func newSpawner() *spawner {
	s := &spawner{reqs: make(chan spawnReq), done: make(chan struct{})}
	go s.loop()
	return s
}

func (s *spawner) loop() {
	defer close(s.done)
	runtime.LockOSThread()
	tainted := false // the thread's affinity could not be restored
	for req := range s.reqs {
		if tainted {
			req.result <- errors.New("the launcher thread's CPU affinity could not be restored after an earlier binding")
			continue
		}
		if req.cpu < 0 {
			req.result <- req.cmd.Start()
			continue
		}
		restore, err := bindThread(req.cpu)
		if err != nil {
			req.result <- err
			continue
		}
		err = req.cmd.Start()
		if rerr := restore(); rerr != nil {
			tainted = true
		}
		req.result <- err
	}
	if !tainted {
		runtime.UnlockOSThread()
	} // else the thread ends with this goroutine, its odd affinity with it
}

// start starts cmd, bound to cpu if cpu >= 0.
func (s *spawner) start(cmd *exec.Cmd, cpu int) error {
	res := make(chan error, 1)
	s.reqs <- spawnReq{cmd: cmd, cpu: cpu, result: res}
	return <-res
}

func (s *spawner) close() {
	close(s.reqs)
	<-s.done
}
