package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"slices"
	"sync/atomic"
	"syscall"
	"time"
)

// The two processes of a request/reply measurement (-rpc). bench starts
// each of them as itself with rpcEnv set to its job: the server answers
// on an address, the client dials it, and they share nothing else.
//
//	server: listen on the address and start the load (-gc-load), print
//	        "ready", answer until SIGTERM, print "gcload server GBPS GCPS"
//	client: dial, start the load, and for each size: Warm calls, then N
//	        timed ones; print "rpc SIZE P50 P99 P999" (µs), and at the end
//	        "gcload client GBPS GCPS"
//
// Each request carries a sequence number that no other request of the
// client has and bytes made from it; the server echoes it, and the
// client checks every reply, outside the timed span, against the request
// it sent: the same length and the same bytes, so a reply that is short,
// long, corrupted, or another request's (stale, duplicated or out of
// order) stops the run with an error that says which.

// rpcEnv carries a worker's job, as JSON.
const rpcEnv = "TACHYON_BENCH_RPC"

// rpcMaxSize is the largest request -rpc-sizes may ask for.
const rpcMaxSize = 1 << 20

// rpcMinSize is the smallest: the sequence number.
const rpcMinSize = 8

// rpcStall is how long a client waits for a reply before it gives up.
const rpcStall = 10 * time.Second

// rpcReady is how long bench waits for a server to be ready, and a
// client for its connection.
const rpcReady = 30 * time.Second

// rpcJob is a worker's job.
type rpcJob struct {
	Role    string  // "server" or "client"
	Kind    string  // the rpcKind's name
	Addr    string  // where the server answers
	Sizes   []int   // client: the request sizes, in bytes
	N       int     // client: timed calls of each size
	Warm    int     // client: untimed calls of each size before them
	GCLoad  float64 // bytes a second the load allocates; 0: no load
	Profile string  // a CPU profile's path, or ""
	Fault   string  // server: a wrong reply to make (rpcFault; tests only)
	Thread  string  // the thread level of the tachyon kind's sessions (-thread)
}

// rpcWorkerMain runs the job rpcEnv holds and exits, or returns at once
// if it holds none. Call it first thing in main (or TestMain), before
// flags are parsed: a worker's are in its job.
func rpcWorkerMain() {
	spec, ok := os.LookupEnv(rpcEnv)
	if !ok {
		return
	}
	var j rpcJob
	err := json.Unmarshal([]byte(spec), &j)
	if err == nil {
		err = j.run(os.Stdout)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench: rpc %s (%s): %v\n", j.Role, j.Kind, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// run does the job, writing its lines to out.
func (j rpcJob) run(out io.Writer) error {
	k := lookupRPC(j.Kind)
	if k == nil {
		return fmt.Errorf("no rpc kind %q in this build", j.Kind)
	}
	stop, err := startProfile(j.Profile)
	if err != nil {
		return err
	}
	switch j.Role {
	case "server":
		err = j.serve(k, out)
	case "client":
		err = j.client(k, out)
	default:
		err = fmt.Errorf("role %q: want server or client", j.Role)
	}
	return errors.Join(err, stop())
}

// serve answers until SIGTERM or SIGINT.
func (j rpcJob) serve(k *rpcKind, out io.Writer) error {
	h := rpcHandler(echo)
	f, err := parseFault(j.Fault)
	if err != nil {
		return err
	}
	if f != nil {
		h = f.handler()
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	var load *gcLoad
	rpcThread = j.Thread
	err = k.serve(ctx, j.Addr, h, func() {
		if j.GCLoad > 0 {
			load = startGCLoad(j.GCLoad)
		}
		fmt.Fprintln(out, "ready")
	})
	if load != nil {
		gbps, gcps := load.stop()
		fmt.Fprintf(out, "gcload server %.3f %.1f\n", gbps, gcps)
	}
	return err
}

// client measures each size in turn on one connection.
func (j rpcJob) client(k *rpcKind, out io.Writer) error {
	if len(j.Sizes) == 0 || j.N < 1 || j.Warm < 0 {
		return fmt.Errorf("sizes %v, %d calls, %d warm-up: nothing to measure", j.Sizes, j.N, j.Warm)
	}
	ctx, cancel := context.WithTimeout(context.Background(), rpcReady)
	rpcThread = j.Thread
	c, err := k.dial(ctx, j.Addr)
	cancel()
	if err != nil {
		return fmt.Errorf("dialling %s: %w", j.Addr, err)
	}
	defer c.close()
	var load *gcLoad
	if j.GCLoad > 0 {
		load = startGCLoad(j.GCLoad)
	}
	var calls atomic.Int64
	stopWatch := watchCalls(&calls, rpcStall)
	defer stopWatch()
	m := &caller{c: c, calls: &calls, rep: make([]byte, 2*slices.Max(j.Sizes)+64)}
	lat := make([]time.Duration, j.N)
	for _, size := range j.Sizes {
		if err := m.measure(size, j.Warm, lat); err != nil {
			return err
		}
		slices.Sort(lat)
		fmt.Fprintf(out, "rpc %d %.3f %.3f %.3f\n", size, percentile(lat, 0.50), percentile(lat, 0.99), percentile(lat, 0.999))
	}
	if load != nil {
		gbps, gcps := load.stop()
		fmt.Fprintf(out, "gcload client %.3f %.1f\n", gbps, gcps)
	}
	return nil
}

// caller makes a client's calls and checks their replies.
type caller struct {
	c     rpcConn
	calls *atomic.Int64 // calls answered, for the watchdog
	seq   uint64        // the last request's sequence number
	req   []byte
	rep   []byte
}

// measure makes warm calls of size bytes and then len(lat), timing each
// of those into lat.
func (m *caller) measure(size, warm int, lat []time.Duration) error {
	if size < rpcMinSize || size > rpcMaxSize {
		return fmt.Errorf("a request of %d bytes: want %d to %d", size, rpcMinSize, rpcMaxSize)
	}
	m.req = grow(m.req, size)
	for i := range warm + len(lat) {
		m.seq++
		fillRequest(m.req, m.seq)
		t := time.Now()
		n, err := m.c.call(m.req, m.rep)
		d := time.Since(t)
		if err == nil {
			err = checkReply(m.req, m.rep[:n])
		}
		if err != nil {
			return fmt.Errorf("request %d (%d B): %w", m.seq, size, err)
		}
		m.calls.Add(1)
		if i >= warm {
			lat[i-warm] = d
		}
	}
	return nil
}

// fillRequest writes seq in the first 8 bytes of req and bytes made from
// it in the rest (xorshift), so that no two requests are alike.
func fillRequest(req []byte, seq uint64) {
	binary.LittleEndian.PutUint64(req, seq)
	x := seq*0x9e3779b97f4a7c15 | 1
	j := 8
	for ; j+8 <= len(req); j += 8 {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		binary.LittleEndian.PutUint64(req[j:], x)
	}
	for ; j < len(req); j++ {
		req[j] = byte(x >> (8 * (j % 8)))
	}
}

// checkReply returns nil if rep is req, and otherwise an error that says
// how it differs: another request's sequence number first (order), then
// the length, then the first byte that differs.
func checkReply(req, rep []byte) error {
	if bytes.Equal(req, rep) {
		return nil
	}
	switch {
	case len(rep) >= rpcMinSize && !bytes.Equal(rep[:rpcMinSize], req[:rpcMinSize]):
		return fmt.Errorf("%w: it carries sequence number %d, another request's: out of order", errBadReply, binary.LittleEndian.Uint64(rep))
	case len(rep) != len(req):
		return fmt.Errorf("%w: %d bytes, want %d", errBadReply, len(rep), len(req))
	}
	i := 0
	for rep[i] == req[i] {
		i++
	}
	return fmt.Errorf("%w: %#02x at byte %d, want %#02x", errBadReply, rep[i], i, req[i])
}

// errBadReply is what checkReply's errors match.
var errBadReply = errors.New("wrong reply")

// percentile returns the p-quantile of sorted in µs: the nearest rank,
// the smallest value with at least p of them at or below it.
func percentile(sorted []time.Duration, p float64) float64 {
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	i = max(0, min(len(sorted)-1, i))
	return float64(sorted[i].Nanoseconds()) / 1e3
}

// watchCalls ends the process with an error if calls stays the same for
// limit: a server that stopped answering must not hang the run. It
// returns what stops the watch.
func watchCalls(calls *atomic.Int64, limit time.Duration) (stop func()) {
	done := make(chan struct{})
	go func() {
		tick := time.NewTicker(limit / 10)
		defer tick.Stop()
		last, since := calls.Load(), time.Now()
		for {
			select {
			case <-done:
				return
			case now := <-tick.C:
				if n := calls.Load(); n != last {
					last, since = n, now
				} else if now.Sub(since) >= limit {
					fmt.Fprintf(os.Stderr, "bench: rpc client: no reply for %v after %d calls\n", limit, n)
					os.Exit(1)
				}
			}
		}
	}()
	return func() { close(done) }
}
