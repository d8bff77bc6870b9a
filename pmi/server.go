package pmi

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

// Server is the process manager's side of PMI-1 for one job of n
// processes, for a launcher of its own (tachyonrun -netns): one
// connection per rank, a key-value space, barriers, and aborts reported
// to the launcher. It speaks the same simple wire protocol as Hydra, so
// that Client, and any PMI-1 library, joins its jobs.
type Server struct {
	n       int
	kvs     string
	onAbort func(rank, code int, msg string)

	mu      sync.Mutex
	kv      map[string]string
	waiting []net.Conn // ranks in the barrier
	conns   []net.Conn
	wg      sync.WaitGroup
}

// Limits the server announces (get_maxes): Hydra's.
const (
	serverKVSMax = 256
	serverKeyMax = 64
	serverValMax = 1024
)

// NewServer makes a server for a job of n processes whose key-value space
// is named kvs. onAbort is called, from the rank's connection goroutine,
// when a rank aborts the job.
func NewServer(n int, kvs string, onAbort func(rank, code int, msg string)) *Server {
	return &Server{n: n, kvs: kvs, onAbort: onAbort, kv: map[string]string{}}
}

// Attach makes rank's connection: it serves one end and returns the
// other, to hand to the process as PMI_FD (the process gets PMI_RANK and
// PMI_SIZE too). The caller closes the returned file once the process
// has it.
func (s *Server) Attach(rank int) (*os.File, error) {
	fds, err := socketpairFDs()
	if err != nil {
		return nil, fmt.Errorf("pmi: a connection for rank %d: %w", rank, err)
	}
	theirs := os.NewFile(uintptr(fds[1]), fmt.Sprintf("pmi-rank-%d", rank))
	f := os.NewFile(uintptr(fds[0]), "pmi-server")
	conn, err := net.FileConn(f)
	f.Close()
	if err != nil {
		theirs.Close()
		return nil, fmt.Errorf("pmi: a connection for rank %d: %w", rank, err)
	}
	s.mu.Lock()
	s.conns = append(s.conns, conn)
	s.mu.Unlock()
	s.wg.Add(1)
	go s.serve(rank, conn)
	return theirs, nil
}

// Close closes every connection and waits for their goroutines.
func (s *Server) Close() {
	s.mu.Lock()
	for _, c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// serve answers rank's commands until it finalizes, aborts or hangs up.
func (s *Server) serve(rank int, conn net.Conn) {
	defer s.wg.Done()
	rd := bufio.NewReader(conn)
	reply := func(format string, args ...any) bool {
		_, err := fmt.Fprintf(conn, format+"\n", args...)
		return err == nil
	}
	for {
		line, err := rd.ReadString('\n')
		if err != nil {
			return
		}
		args := map[string]string{}
		for _, w := range strings.Fields(line) {
			k, v, _ := strings.Cut(w, "=")
			args[k] = v
		}
		ok := true
		switch args["cmd"] {
		case "init":
			ok = reply("cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0")
		case "get_maxes":
			ok = reply("cmd=maxes kvsname_max=%d keylen_max=%d vallen_max=%d", serverKVSMax, serverKeyMax, serverValMax)
		case "get_my_kvsname":
			ok = reply("cmd=my_kvsname kvsname=%s", s.kvs)
		case "get_universe_size":
			ok = reply("cmd=universe_size size=%d", s.n)
		case "get_appnum":
			ok = reply("cmd=appnum appnum=0")
		case "put":
			switch k, v := args["key"], args["value"]; {
			case args["kvsname"] != s.kvs:
				ok = reply("cmd=put_result rc=-1 msg=unknown_kvsname")
			case k == "" || len(k) >= serverKeyMax || len(v) >= serverValMax || len(line) > maxCommand: // a longer line Slurm would cut
				ok = reply("cmd=put_result rc=-1 msg=bad_key_or_value")
			default:
				s.mu.Lock()
				s.kv[k] = v
				s.mu.Unlock()
				ok = reply("cmd=put_result rc=0 msg=success")
			}
		case "get":
			s.mu.Lock()
			v, found := s.kv[args["key"]]
			s.mu.Unlock()
			if found && args["kvsname"] == s.kvs {
				ok = reply("cmd=get_result rc=0 msg=success value=%s", v)
			} else {
				ok = reply("cmd=get_result rc=-1 msg=key_%s_not_found", args["key"])
			}
		case "barrier_in":
			s.barrier(conn)
		case "finalize":
			reply("cmd=finalize_ack")
			return
		case "abort":
			code, _ := strconv.Atoi(args["exitcode"])
			msg := ""
			if _, m, found := strings.Cut(line, "message="); found {
				msg = strings.TrimSpace(m)
			}
			if s.onAbort != nil {
				s.onAbort(rank, code, msg)
			}
			return
		default:
			ok = reply("cmd=%s rc=-1 msg=unknown_command", args["cmd"])
		}
		if !ok {
			return
		}
	}
}

// barrier counts conn in; when all n ranks are in, it lets them all out.
func (s *Server) barrier(conn net.Conn) {
	s.mu.Lock()
	s.waiting = append(s.waiting, conn)
	var out []net.Conn
	if len(s.waiting) == s.n {
		out, s.waiting = s.waiting, nil
	}
	s.mu.Unlock()
	for _, c := range out {
		io.WriteString(c, "cmd=barrier_out\n")
	}
}
