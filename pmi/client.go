// Package pmi is a client of PMI-1, the process-management interface that
// MPICH's Hydra (mpiexec.hydra, mpiexec.mpich) and Slurm speak to the
// processes they start, in its "simple" text wire protocol.
//
// The launcher hands each process a connected socket, as a descriptor
// number in PMI_FD or as a host:port to dial in PMI_PORT, and its place in
// the job in PMI_RANK and PMI_SIZE (or, with PMI_PORT and PMI_ID, in an
// initial handshake). Over that socket the process sends one command per
// line and reads one reply line per command:
//
//	cmd=init pmi_version=1 pmi_subversion=1   cmd=response_to_init rc=0 ...
//	cmd=get_maxes                             cmd=maxes kvsname_max=N keylen_max=N vallen_max=N
//	cmd=get_my_kvsname                        cmd=my_kvsname kvsname=NAME
//	cmd=put kvsname=K key=A value=V           cmd=put_result rc=0 ...
//	cmd=barrier_in                            cmd=barrier_out
//	cmd=get kvsname=K key=A                   cmd=get_result rc=0 value=V
//	cmd=finalize                              cmd=finalize_ack
//	cmd=abort exitcode=N message=M            (none: the launcher ends the job)
//
// Words are separated by spaces and have no escapes, so keys and values
// are restricted to printable ASCII without spaces or '='. A value Put by
// one process is visible to Get in every process once all of them have
// passed a Barrier after the Put.
//
// docs/launching.md says how Hydra and Slurm jobs are joined through it.
package pmi

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Environment variables a PMI launcher sets.
const (
	EnvFD   = "PMI_FD"   // descriptor of the connected socket
	EnvPort = "PMI_PORT" // host:port to dial instead of PMI_FD
	EnvID   = "PMI_ID"   // with PMI_PORT: this process's id for the initack handshake
	EnvRank = "PMI_RANK" // this process's rank
	EnvSize = "PMI_SIZE" // the number of processes
)

// Errors. Every error the client returns matches one of these with
// errors.Is, or is an I/O error of the connection.
var (
	// ErrProtocol: the process manager sent a reply that is malformed or
	// not the one the command expects.
	ErrProtocol = errors.New("pmi: protocol error")
	// ErrRefused: the process manager answered a command with a non-zero
	// rc.
	ErrRefused = errors.New("pmi: command refused by the process manager")
	// ErrNotFound: Get found no value under the key.
	ErrNotFound = errors.New("pmi: key not found")
	// ErrInvalid: a key, value or environment variable the client cannot
	// use.
	ErrInvalid = errors.New("pmi: invalid argument")
	// ErrClosed: the client was finalized or aborted.
	ErrClosed = errors.New("pmi: client closed")
)

const (
	// maxCommand is the longest command line sent, its newline included:
	// Slurm's pmi2 plugin reads a command with one read of 1024 bytes
	// (MPICH's simple PMI's MAXLINE) and misreads the rest of a longer
	// one as another command.
	maxCommand = 1024
	maxLine    = 64 << 10 // longest reply line accepted
	maxAbort   = 512      // longest abort message sent
	dialLimit  = 30 * time.Second
)

// initTimeout bounds the handshake, so that a descriptor left over from
// some other launcher fails Init instead of hanging it; a var for tests.
var initTimeout = 60 * time.Second

// Client is one process's connection to its PMI process manager. Its
// methods may be called from several goroutines; commands are serialized.
type Client struct {
	mu     sync.Mutex // one command and its reply at a time
	conn   net.Conn
	rd     *bufio.Reader
	closed atomic.Bool

	rank, size             int
	kvs                    string
	kvsMax, keyMax, valMax int
	gets                   atomic.Int64 // this client's pmi_gets, for tests
}

// FromEnv connects to the process manager named by the environment
// (PMI_FD, else PMI_PORT) and performs the PMI-1 handshake: init,
// get_maxes and get_my_kvsname. It returns nil, nil when neither variable
// is set, that is, when the process was not started by a PMI launcher.
//
// PMI_FD needs a Unix system: elsewhere (Windows) a descriptor number
// cannot be turned into a connection, so there FromEnv returns an error
// matching ErrInvalid whenever PMI_FD is set. PMI_PORT works everywhere.
func FromEnv() (*Client, error) {
	fdVar, port := os.Getenv(EnvFD), os.Getenv(EnvPort)
	switch {
	case fdVar != "":
		conn, err := connFromFD(fdVar)
		if err != nil {
			return nil, err
		}
		rank, size, err := rankSizeFromEnv()
		if err != nil {
			conn.Close()
			return nil, err
		}
		return newClient(conn, rank, size)
	case port != "":
		conn, err := net.DialTimeout("tcp", port, dialLimit)
		if err != nil {
			return nil, fmt.Errorf("pmi: connecting to %s=%s: %w", EnvPort, port, err)
		}
		if id := os.Getenv(EnvID); id != "" {
			return newClientPort(conn, id)
		}
		rank, size, err := rankSizeFromEnv()
		if err != nil {
			conn.Close()
			return nil, err
		}
		return newClient(conn, rank, size)
	}
	return nil, nil
}

// rankSizeFromEnv reads PMI_RANK and PMI_SIZE.
func rankSizeFromEnv() (rank, size int, err error) {
	r, s := os.Getenv(EnvRank), os.Getenv(EnvSize)
	rank, err1 := strconv.Atoi(r)
	size, err2 := strconv.Atoi(s)
	if err1 != nil || err2 != nil || size < 1 || rank < 0 || rank >= size {
		return 0, 0, fmt.Errorf("%w: %s=%q and %s=%q do not give a rank and a size (are they set by the launcher?)",
			ErrInvalid, EnvRank, r, EnvSize, s)
	}
	return rank, size, nil
}

// newClientPort performs the initack handshake of the PMI_PORT model, in
// which the process manager tells the process its size and rank, then the
// usual handshake.
func newClientPort(conn net.Conn, id string) (*Client, error) {
	if _, err := strconv.Atoi(id); err != nil {
		conn.Close()
		return nil, fmt.Errorf("%w: %s=%q is not a number", ErrInvalid, EnvID, id)
	}
	c := &Client{conn: conn, rd: bufio.NewReaderSize(conn, 4096)}
	conn.SetDeadline(time.Now().Add(initTimeout))
	fail := func(err error) (*Client, error) {
		conn.Close()
		return nil, err
	}
	if _, err := c.roundTrip("initack", "initack", "pmiid", id); err != nil {
		return fail(err)
	}
	// Three lines follow, "cmd=set size=N", "cmd=set rank=N" and
	// "cmd=set debug=N"; take them in any order.
	vals := map[string]int{}
	for range 3 {
		r, err := c.readReply("set", "initack")
		if err != nil {
			return fail(err)
		}
		if len(r.kv) != 4 {
			return fail(fmt.Errorf("%w: initack: want cmd=set KEY=N, got %q", ErrProtocol, r.line))
		}
		v, err := r.int(r.kv[2])
		if err != nil {
			return fail(err)
		}
		vals[r.kv[2]] = v
	}
	rank, okR := vals["rank"]
	size, okS := vals["size"]
	if !okR || !okS || size < 1 || rank < 0 || rank >= size {
		return fail(fmt.Errorf("%w: initack did not give a rank and a size: %v", ErrProtocol, vals))
	}
	c.rank, c.size = rank, size
	if err := c.handshake(); err != nil {
		return fail(err)
	}
	return c, nil
}

// newClient performs the PMI-1 handshake over conn; it closes conn on
// failure.
func newClient(conn net.Conn, rank, size int) (*Client, error) {
	c := &Client{conn: conn, rd: bufio.NewReaderSize(conn, 4096), rank: rank, size: size}
	conn.SetDeadline(time.Now().Add(initTimeout))
	if err := c.handshake(); err != nil {
		conn.Close()
		return nil, err
	}
	return c, nil
}

// handshake sends init, get_maxes and get_my_kvsname, then clears the
// connection's deadline.
func (c *Client) handshake() error {
	r, err := c.roundTrip("init", "response_to_init", "pmi_version", "1", "pmi_subversion", "1")
	if err != nil {
		return err
	}
	if rc, ok := r.get("rc"); !ok || rc != "0" {
		v, _ := r.get("pmi_version")
		sv, _ := r.get("pmi_subversion")
		return fmt.Errorf("%w: init: the process manager does not accept PMI version 1.1 (rc=%q, it offers %s.%s)", ErrRefused, rc, v, sv)
	}
	if r, err = c.roundTrip("get_maxes", "maxes"); err != nil {
		return err
	}
	for _, f := range []struct {
		key string
		dst *int
	}{{"kvsname_max", &c.kvsMax}, {"keylen_max", &c.keyMax}, {"vallen_max", &c.valMax}} {
		v, err := r.int(f.key)
		if err != nil {
			return err
		}
		if v < 2 {
			return fmt.Errorf("%w: maxes: %s=%d", ErrProtocol, f.key, v)
		}
		*f.dst = v
	}
	if r, err = c.roundTrip("get_my_kvsname", "my_kvsname"); err != nil {
		return err
	}
	kvs, ok := r.get("kvsname")
	if !ok || kvs == "" || !isWord(kvs) {
		return fmt.Errorf("%w: my_kvsname without a usable kvsname: %q", ErrProtocol, r.line)
	}
	c.kvs = kvs
	return c.conn.SetDeadline(time.Time{})
}

// Rank returns this process's rank in the job.
func (c *Client) Rank() int { return c.rank }

// Size returns the number of processes in the job.
func (c *Client) Size() int { return c.size }

// KVSName returns the name of the job's key-value space.
func (c *Client) KVSName() string { return c.kvs }

// Put stores value under key in the job's key-value space. Other
// processes see it after a Barrier that follows the Put. Keys must be
// shorter than the process manager's keylen_max (64 under Hydra) and
// values shorter than its vallen_max (1024 under Hydra), and the command
// that carries them at most 1024 bytes (what Slurm reads: MaxValue); both
// must be printable ASCII without spaces or '=' (a value may be empty).
func (c *Client) Put(key, value string) error {
	if err := c.checkKey("Put", key); err != nil {
		return err
	}
	if max := c.MaxValue(key); len(value) > max || (value != "" && !isWord(value)) {
		return fmt.Errorf("%w: Put %q: value %.40q of %d bytes: use at most %d printable ASCII bytes without spaces or '='",
			ErrInvalid, key, value, len(value), max)
	}
	pvPuts.Add(1)
	r, err := c.command("put", "put_result", "kvsname", c.kvs, "key", key, "value", value)
	if err != nil {
		return err
	}
	return r.checkRC()
}

// MaxValue returns the longest value Put takes under key: one less than
// vallen_max, or less where the command would be longer than 1024 bytes.
func (c *Client) MaxValue(key string) int {
	return min(c.valMax-1, maxCommand-len("cmd=put kvsname= key= value=\n")-len(c.kvs)-len(key))
}

// Get returns the value stored under key. A key nobody Put (or whose Put
// no Barrier has published yet) gives an error matching ErrNotFound.
func (c *Client) Get(key string) (string, error) {
	if err := c.checkKey("Get", key); err != nil {
		return "", err
	}
	pvGets.Add(1)
	c.gets.Add(1)
	r, err := c.command("get", "get_result", "kvsname", c.kvs, "key", key)
	if err != nil {
		return "", err
	}
	rc, err := r.int("rc")
	if err != nil {
		return "", err
	}
	if rc != 0 {
		msg, _ := r.get("msg")
		return "", fmt.Errorf("%w: %q in %s (rc=%d, %s)", ErrNotFound, key, c.kvs, rc, msg)
	}
	v, ok := r.get("value")
	if !ok {
		return "", fmt.Errorf("%w: get_result with rc=0 but no value: %q", ErrProtocol, r.line)
	}
	return v, nil
}

// AppNum returns which block of an MPMD launch this process belongs to
// (mpiexec's "-n 1 a : -n 1 b" makes 0 and 1): PMI-1 get_appnum.
func (c *Client) AppNum() (int, error) {
	r, err := c.command("get_appnum", "appnum")
	if err != nil {
		return 0, err
	}
	return r.int("appnum")
}

// UniverseSize returns how many processes the process manager could run
// for the job: PMI-1 get_universe_size.
func (c *Client) UniverseSize() (int, error) {
	r, err := c.command("get_universe_size", "universe_size")
	if err != nil {
		return 0, err
	}
	return r.int("size")
}

// Barrier returns once every process of the job has entered it; it also
// publishes the values Put before it.
func (c *Client) Barrier() error {
	pvBarriers.Add(1)
	r, err := c.command("barrier_in", "barrier_out")
	if err != nil {
		return err
	}
	if _, ok := r.get("rc"); ok {
		return r.checkRC()
	}
	return nil
}

// Finalize tells the process manager that this process is done with PMI
// and closes the connection. Afterwards every method returns ErrClosed.
func (c *Client) Finalize() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed.Load() {
		return ErrClosed
	}
	_, err := c.roundTrip("finalize", "finalize_ack")
	c.closed.Store(true)
	if e := c.conn.Close(); err == nil && e != nil {
		err = fmt.Errorf("pmi: closing the connection: %w", e)
	}
	return err
}

// Abort asks the process manager to end the whole job with code as its
// exit status; msg (spaces and other characters the protocol cannot carry
// replaced by '_', cut to 512 bytes) goes with it. The process manager
// does not answer: the caller should exit with code right after. Abort
// does not wait for a command in progress on another goroutine.
func (c *Client) Abort(code int, msg string) error {
	if c.closed.Swap(true) {
		return ErrClosed
	}
	line := "cmd=abort exitcode=" + strconv.Itoa(code)
	if m := sanitize(msg); m != "" {
		line += " message=" + m
	}
	// net.Conn serializes concurrent Writes, so this line cannot land
	// inside another command's.
	if _, err := c.conn.Write([]byte(line + "\n")); err != nil {
		return fmt.Errorf("pmi: sending abort: %w", err)
	}
	return nil
}

func (c *Client) checkKey(op, key string) error {
	if key == "" || len(key) >= c.keyMax || !isWord(key) {
		return fmt.Errorf("%w: %s: key %q: use 1 to %d printable ASCII bytes without spaces or '='",
			ErrInvalid, op, key, c.keyMax-1)
	}
	return nil
}

// command sends one command and reads its reply.
func (c *Client) command(cmd, want string, args ...string) (reply, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed.Load() {
		return reply{}, ErrClosed
	}
	return c.roundTrip(cmd, want, args...)
}

// roundTrip writes "cmd=CMD k=v ..." and reads the reply, which must be
// cmd=WANT.
func (c *Client) roundTrip(cmd, want string, args ...string) (reply, error) {
	var b strings.Builder
	b.WriteString("cmd=")
	b.WriteString(cmd)
	for i := 0; i+1 < len(args); i += 2 {
		b.WriteByte(' ')
		b.WriteString(args[i])
		b.WriteByte('=')
		b.WriteString(args[i+1])
	}
	b.WriteByte('\n')
	if _, err := io.WriteString(c.conn, b.String()); err != nil {
		return reply{}, fmt.Errorf("pmi: sending %s: %w", cmd, err)
	}
	return c.readReply(want, cmd)
}

// readReply reads one reply line, which must be cmd=want; cmd names the
// command it answers, for errors.
func (c *Client) readReply(want, cmd string) (reply, error) {
	line, err := c.readLine()
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return reply{}, fmt.Errorf("pmi: waiting for the reply to %s: %w", cmd, err)
	}
	r, err := parseReply(line)
	if err != nil {
		return reply{}, fmt.Errorf("reply to %s: %w", cmd, err)
	}
	if r.cmd != want {
		return reply{}, fmt.Errorf("%w: %s answered with cmd=%s, want cmd=%s: %q", ErrProtocol, cmd, r.cmd, want, line)
	}
	return r, nil
}

// readLine returns the next line without its newline; a line longer than
// maxLine is an error.
func (c *Client) readLine() (string, error) {
	var long []byte
	for {
		frag, err := c.rd.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			if len(long)+len(frag) > maxLine {
				return "", fmt.Errorf("%w: reply line longer than %d bytes", ErrProtocol, maxLine)
			}
			long = append(long, frag...)
			continue
		}
		if err != nil {
			return "", err
		}
		if long != nil {
			frag = append(long, frag...)
			if len(frag) > maxLine {
				return "", fmt.Errorf("%w: reply line longer than %d bytes", ErrProtocol, maxLine)
			}
		}
		frag = bytes.TrimSuffix(frag[:len(frag)-1], []byte{'\r'})
		return string(frag), nil
	}
}

// reply is one parsed reply line: cmd=NAME followed by key=value words.
type reply struct {
	line string
	cmd  string
	kv   []string // key, value, key, value...
}

// parseReply splits a reply line into its words. Every word must be
// key=value with a non-empty key, and the first must be cmd=NAME.
func parseReply(line string) (reply, error) {
	r := reply{line: line}
	for _, w := range strings.Fields(line) {
		k, v, ok := strings.Cut(w, "=")
		if !ok || k == "" {
			return reply{}, fmt.Errorf("%w: word %q is not key=value in %q", ErrProtocol, w, line)
		}
		r.kv = append(r.kv, k, v)
	}
	if len(r.kv) == 0 || r.kv[0] != "cmd" || r.kv[1] == "" {
		return reply{}, fmt.Errorf("%w: line does not start with cmd=NAME: %q", ErrProtocol, line)
	}
	r.cmd = r.kv[1]
	return r, nil
}

// get returns the value of the first word with key k.
func (r reply) get(k string) (string, bool) {
	for i := 2; i+1 < len(r.kv); i += 2 {
		if r.kv[i] == k {
			return r.kv[i+1], true
		}
	}
	return "", false
}

// int returns the value of key k as an integer.
func (r reply) int(k string) (int, error) {
	s, ok := r.get(k)
	if !ok {
		return 0, fmt.Errorf("%w: cmd=%s without %s: %q", ErrProtocol, r.cmd, k, r.line)
	}
	v, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("%w: cmd=%s: %s=%q is not an integer", ErrProtocol, r.cmd, k, s)
	}
	return v, nil
}

// checkRC requires rc=0.
func (r reply) checkRC() error {
	rc, err := r.int("rc")
	if err != nil {
		return err
	}
	if rc != 0 {
		msg, _ := r.get("msg")
		return fmt.Errorf("%w: cmd=%s rc=%d msg=%s", ErrRefused, r.cmd, rc, msg)
	}
	return nil
}

// isWord reports whether s can travel as one word: printable ASCII
// without spaces or '='.
func isWord(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c > '~' || c == '=' {
			return false
		}
	}
	return true
}

// sanitize makes msg one word of at most maxAbort bytes.
func sanitize(msg string) string {
	b := []byte(msg)
	if len(b) > maxAbort {
		b = b[:maxAbort]
	}
	for i, c := range b {
		if c <= ' ' || c > '~' || c == '=' {
			b[i] = '_'
		}
	}
	return string(b)
}
