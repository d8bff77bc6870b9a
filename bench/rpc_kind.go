package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// The kinds of transport the request/reply benchmark (-rpc) measures.
// A kind is a server that answers each request on an address with the
// reply a handler makes, and a client that dials that address and makes
// calls one at a time. The harness (rpc.go, rpc_worker.go) does the
// rest for every kind alike: processes, CPUs, hosts, warm-up, timing,
// checking each reply, the garbage collector's load and the report.
// A kind registers itself from init: tcp (rpc_tcp.go), grpc (rpc_grpc.go)
// and, built with -tags rpctachyon, tachyon (rpc_tachyon.go).

// rpcKind is one kind of transport.
type rpcKind struct {
	name  string // what -rpc-kind names it by, and its column in the tables
	about string // what it is, a line of the table's heading

	// serve answers requests on addr (host:port) until ctx ends, each
	// with the reply h makes of it, and then returns nil (or the error
	// that stopped it before). It calls ready once, when a client may
	// dial addr.
	serve func(ctx context.Context, addr string, h rpcHandler, ready func()) error

	// dial connects a client to the server of this kind on addr.
	dial func(ctx context.Context, addr string) (rpcConn, error)
}

// rpcConn is a client's connection to a server: one call at a time.
type rpcConn interface {
	// call sends req, waits for its reply and writes the reply into
	// rep, returning its length. A reply longer than rep is an error.
	// The caller may change req and rep once call returns.
	call(req, rep []byte) (int, error)

	// close ends the connection.
	close() error
}

// rpcHandler makes the reply to one request: it appends it to dst and
// returns the result. A server may call it from several goroutines.
type rpcHandler func(dst, req []byte) []byte

// echo is the benchmark's handler: the reply is the request.
func echo(dst, req []byte) []byte { return append(dst, req...) }

// errReplyTooLong is what a conn's call returns for a reply longer than
// its buffer.
var errReplyTooLong = errors.New("reply longer than the request's buffer")

// rpcKinds are the kinds registered, by name; written only from init.
var rpcKinds = map[string]*rpcKind{}

// registerRPC adds k to the kinds -rpc-kind may name; a kind's file calls
// it from init.
func registerRPC(k *rpcKind) {
	if _, dup := rpcKinds[k.name]; dup {
		panic("bench: two rpc kinds named " + k.name)
	}
	rpcKinds[k.name] = k
}

// lookupRPC returns the kind named name, or nil.
func lookupRPC(name string) *rpcKind {
	return rpcKinds[name]
}

// rpcKindNames returns the registered kinds' names, sorted.
func rpcKindNames() []string {
	var names []string
	for n := range rpcKinds {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// tachyonKind names Tachyon's kind: the default of -rpc-kind when it is
// built in, the one -compare measures the anchors against.
const tachyonKind = "tachyon"

// rpcAnchorKinds are the anchors of -rpc -compare, in the tables' order:
// what a Go service team picks instead of Tachyon.
var rpcAnchorKinds = []string{"grpc", "tcp"}

// defaultRPCKind returns the kind -rpc measures when -rpc-kind does not
// say: tachyon where it is built in, tcp until then.
func defaultRPCKind() string {
	if lookupRPC(tachyonKind) != nil {
		return tachyonKind
	}
	return "tcp"
}

// rpcFault makes a server answer one request wrongly, so that a test can
// see the client catch it. It is set by tests only (rpcJob.Fault).
type rpcFault struct {
	mode string // corrupt, short, long or stale
	at   int    // the request (counted from 0 over the server's life) to answer wrongly
}

// parseFault reads "MODE:AT"; "" is no fault.
func parseFault(s string) (*rpcFault, error) {
	if s == "" {
		return nil, nil
	}
	mode, at, ok := strings.Cut(s, ":")
	n, err := strconv.Atoi(at)
	if !ok || err != nil || n < 0 || !slices.Contains([]string{"corrupt", "short", "long", "stale"}, mode) {
		return nil, fmt.Errorf("fault %q: want corrupt|short|long|stale:N", s)
	}
	return &rpcFault{mode, n}, nil
}

// handler returns echo with the fault: request f.at gets a reply with
// its last byte changed (corrupt), one byte short (short), one byte too
// many (long), or the reply of the request before it (stale).
func (f *rpcFault) handler() rpcHandler {
	var mu sync.Mutex
	n := 0
	var prev []byte
	return func(dst, req []byte) []byte {
		mu.Lock()
		defer mu.Unlock()
		i := n
		n++
		if i != f.at {
			prev = append(prev[:0], req...)
			return echo(dst, req)
		}
		switch f.mode {
		case "corrupt":
			dst = echo(dst, req)
			dst[len(dst)-1] ^= 0x5a
		case "short":
			dst = echo(dst, req[:len(req)-1])
		case "long":
			dst = append(echo(dst, req), 0)
		case "stale":
			dst = echo(dst, prev)
		}
		prev = append(prev[:0], req...)
		return dst
	}
}
