package mpi

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/tachyon-hpc/tachyon/cvar"
)

// Matched probe through the facade: each scenario runs in-process and as
// processes, as the other facade tests do.

// mprobeEager is the engine_eager_limit the matched-probe tests run with:
// raised past a packet of the rings (32 KiB less a header), so that
// 100 KiB goes eager in fragments, and 1 MiB still by rendezvous.
const mprobeEager = 128 << 10

// mprobeSizes covers each way a matched probe finds a message: empty, a
// short packet, an eager message in one packet, one in fragments, and a
// rendezvous announcement.
var mprobeSizes = []int{0, 8, 4000, 100 << 10, 1 << 20}

// bothEager runs scenario name as both does, with engine_eager_limit set
// to mprobeEager in-process and in every process.
func bothEager(t *testing.T, n int, name string) {
	t.Helper()
	setEagerLimit(t, mprobeEager)
	both(t, n, name, cvar.EnvPrefix+"ENGINE_EAGER_LIMIT="+strconv.Itoa(mprobeEager))
}

// setEagerLimit sets engine_eager_limit for the test.
func setEagerLimit(t *testing.T, n int) {
	t.Helper()
	v, _ := cvar.Lookup("engine_eager_limit")
	old := v.String()
	if err := cvar.Set("engine_eager_limit", strconv.Itoa(n)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cvar.Set("engine_eager_limit", old) })
}

// Each size is probed and received in every way: Mprobe or Improbe, from
// the rank or AnySource, with the tag or AnyTag; Recv or Irecv. The
// message taken is no longer found by a probe, and a second receive of
// it fails with ErrRequest.
var scMprobeSizes = scenario("mprobe-sizes", func(c *Comm) error {
	if c.Rank() == 0 {
		for k, n := range mprobeSizes {
			if err := c.Send(pattern(n, k), 1, k); err != nil {
				return err
			}
		}
		return nil
	}
	for k, n := range mprobeSizes {
		src, tag := 0, k
		if k%2 == 1 {
			src, tag = AnySource, AnyTag
		}
		var m *Message
		var st Status
		var err error
		if k%3 == 0 {
			m, st, err = c.Mprobe(src, tag)
		} else {
			for ok := false; !ok && err == nil; {
				m, st, ok, err = c.Improbe(src, tag)
			}
		}
		if err != nil || st.Source != 0 || st.Tag != k || st.Count != n {
			return fmt.Errorf("probe of message %d (%d bytes): %+v %v", k, n, st, err)
		}
		if _, ok, err := c.Iprobe(0, k); ok || err != nil {
			return fmt.Errorf("message %d found by Iprobe after a matched probe took it (%v)", k, err)
		}
		buf := make([]byte, n)
		if k%2 == 0 {
			st, err = m.Recv(buf)
		} else {
			var r *Request
			if r, err = m.Irecv(buf); err == nil {
				st, err = r.Wait()
			}
		}
		if err != nil || st.Source != 0 || st.Tag != k || st.Count != n || !bytes.Equal(buf, pattern(n, k)) {
			return fmt.Errorf("receive of message %d (%d bytes): %+v %v", k, n, st, err)
		}
		if err := onlyClass(m.Recv(buf)); err != ErrRequest {
			return fmt.Errorf("second Recv of message %d: class %v", k, err)
		}
		if _, err := m.Irecv(buf); ErrorClass(err) != ErrRequest {
			return fmt.Errorf("second Irecv of message %d: %v", k, err)
		}
	}
	return nil
})

// onlyClass returns the one class err matches, or an error saying it
// matches none or several.
func onlyClass(_ Status, err error) error {
	var matched []error
	for _, cls := range classes {
		if errors.Is(err, cls) {
			matched = append(matched, cls)
		}
	}
	if len(matched) != 1 {
		return fmt.Errorf("error %v matches classes %v", err, matched)
	}
	return matched[0]
}

func TestMprobeSizes(t *testing.T) { bothEager(t, 2, scMprobeSizes) }

// Truncation, ProcNull, a nil Message.
var scMprobeEdges = scenario("mprobe-edges", func(c *Comm) error {
	if c.Rank() == 0 {
		for k, n := range mprobeSizes[1:] {
			if err := c.Send(pattern(n, k), 1, k); err != nil {
				return err
			}
		}
		return nil
	}
	for k, n := range mprobeSizes[1:] {
		m, _, err := c.Mprobe(0, k)
		if err != nil {
			return err
		}
		buf := make([]byte, 5)
		st, err := m.Recv(buf)
		if !errors.Is(err, ErrTruncate) || ErrorClass(err) != ErrTruncate || st.Count != 5 || !bytes.Equal(buf, pattern(n, k)[:5]) {
			return fmt.Errorf("truncated receive of %d bytes: %+v %v", n, st, err)
		}
	}
	for _, probe := range []func() (*Message, Status, error){
		func() (*Message, Status, error) { return c.Mprobe(ProcNull, 3) },
		func() (*Message, Status, error) {
			m, st, ok, err := c.Improbe(ProcNull, AnyTag)
			if !ok && err == nil {
				err = errors.New("Improbe of ProcNull found nothing")
			}
			return m, st, err
		},
	} {
		m, st, err := probe()
		if err != nil || m != MessageNoProc || st != procNullStatus {
			return fmt.Errorf("probe of ProcNull: %v %+v %v", m, st, err)
		}
	}
	for range 2 { // any number of times
		if st, err := MessageNoProc.Recv(make([]byte, 4)); err != nil || st != procNullStatus {
			return fmt.Errorf("Recv of MessageNoProc: %+v %v", st, err)
		}
		r, err := MessageNoProc.Irecv(nil)
		if err != nil {
			return err
		}
		if st, err := r.Wait(); err != nil || st != procNullStatus {
			return fmt.Errorf("Irecv of MessageNoProc: %+v %v", st, err)
		}
	}
	var none *Message
	if err := onlyClass(none.Recv(nil)); err != ErrRequest {
		return fmt.Errorf("Recv of a nil Message: class %v", err)
	}
	if _, err := none.Irecv(nil); ErrorClass(err) != ErrRequest {
		return fmt.Errorf("Irecv of a nil Message: %v", err)
	}
	if _, _, err := c.Mprobe(c.Size(), 0); ErrorClass(err) != ErrRank {
		return fmt.Errorf("Mprobe of rank %d: %v", c.Size(), err)
	}
	if _, _, _, err := c.Improbe(0, -5); ErrorClass(err) != ErrTag {
		return fmt.Errorf("Improbe of tag -5: %v", err)
	}
	return nil
})

func TestMprobeEdges(t *testing.T) { bothEager(t, 2, scMprobeEdges) }

// A message that a matched probe took and no receive received is what
// Finalize reports, on the rank that probed it.
var scMprobeLeftover = scenario("mprobe-leftover", func(c *Comm) error {
	if c.Rank() == 0 {
		if err := c.Send([]byte("hello"), 1, 0); err != nil {
			return err
		}
		return leftoverFinalize(c)
	}
	if _, _, err := c.Mprobe(0, 0); err != nil {
		return err
	}
	return leftoverFinalize(c, "left 1 operation(s) unfinished",
		"a message from rank 0, tag 0, 5 bytes, on MPI_COMM_WORLD, that no receive took (a matched probe took it: its Message was never received)")
})

func TestMprobeLeftover(t *testing.T) {
	if err := Run(2, scenarios[scMprobeLeftover]); err != errFinalized {
		t.Fatal(err)
	}
	runProcesses(t, 2, scMprobeLeftover)
}

// senderDies is a scenario in which rank 0 sends a message of n bytes
// (by Isend: a rendezvous send waits for its receive), waits until rank
// 1 has probed it, and leaves without Finalize (exit, in a process); rank
// 1 then receives the message: ErrProcFailed if its data had not all
// come, the message if it had.
func senderDies(n int, exit func()) func(*Comm) error {
	return func(c *Comm) error {
		if c.Rank() == 0 {
			if _, err := c.Isend(pattern(n, 4), 1, 7); err != nil {
				return err
			}
			if _, err := c.Recv(nil, 1, 8); err != nil { // probed
				return err
			}
			exit()
			return nil
		}
		m, st, err := c.Mprobe(0, 7)
		if err != nil || st.Count != n {
			return fmt.Errorf("probe: %+v %v", st, err)
		}
		if err := c.Send(nil, 0, 8); err != nil {
			return err
		}
		// A probe of a message rank 0 never sends ends when it is found
		// gone.
		if _, err := c.Probe(0, 9); ErrorClass(err) != ErrProcFailed {
			return fmt.Errorf("probe of the dead rank: %v", err)
		}
		buf := make([]byte, n)
		st, err = m.Recv(buf)
		if n > 16<<10 {
			if onlyClass(st, err) != ErrProcFailed {
				return fmt.Errorf("receive of a rendezvous message from a dead sender: %+v %v, want ErrProcFailed", st, err)
			}
		} else if err != nil || !bytes.Equal(buf, pattern(n, 4)) {
			return fmt.Errorf("receive of an eager message from a dead sender: %+v %v, want the message", st, err)
		}
		return finalizedAlone(c.Finalize())
	}
}

var (
	scMprobeDiesRndv  = scenario("mprobe-dies-rndv", processExits(senderDies(1<<20, func() { os.Exit(0) })))
	scMprobeDiesEager = scenario("mprobe-dies-eager", processExits(senderDies(1000, func() { os.Exit(0) })))
)

// processExits adapts a scenario that finalizes (or exits) itself to the
// process harness.
func processExits(fn func(*Comm) error) func(*Comm) error {
	return func(c *Comm) error {
		if err := fn(c); err != nil {
			return err
		}
		return errFinalized
	}
}

// TestMprobeSenderDies: in-process the sender's rank returns without
// Finalize; as processes it exits.
func TestMprobeSenderDies(t *testing.T) {
	for _, c := range []struct {
		name string
		n    int
	}{{scMprobeDiesRndv, 1 << 20}, {scMprobeDiesEager, 1000}} {
		t.Run(c.name, func(t *testing.T) {
			if err := Run(2, senderDies(c.n, func() {})); err != nil {
				t.Fatal(err)
			}
			runProcesses(t, 2, c.name)
		})
	}
}

// MPI-3's answer to Probe then Recv at ThreadMultiple: goroutines of one
// rank each Mprobe a message of the same source and tag and receive it
// into a buffer of its size; every message is received exactly once,
// whole. (With Probe then Recv, another goroutine's Recv takes the
// message probed, and a buffer sized for it gets another.)
const (
	mtGoroutines = 4
	mtMessages   = 400
)

// mtSize is the size of message i: short, eager, fragmented, rendezvous.
func mtSize(i int) int { return []int{8, 3000, 100 << 10, 300 << 10, 64}[i%5] }

var scMprobeThreads = scenario("mprobe-threads", func(c *Comm) error {
	if c.Rank() == 0 {
		for i := range mtMessages + mtGoroutines {
			b := []byte{}
			if i < mtMessages {
				b = pattern(mtSize(i), i)
				binary.LittleEndian.PutUint32(b, uint32(i))
			}
			if err := c.Send(b, 1, 5); err != nil { // an empty message stops a goroutine
				return err
			}
		}
		return nil
	}
	var mu sync.Mutex
	got := make([]int, mtMessages)
	errs := make(chan error, mtGoroutines)
	for range mtGoroutines {
		go func() {
			errs <- func() error {
				for {
					m, st, err := c.Mprobe(0, 5)
					if err != nil {
						return err
					}
					buf := make([]byte, st.Count)
					rst, err := m.Recv(buf)
					if err != nil || rst != st {
						return fmt.Errorf("receive of a %d-byte message: %+v %v", st.Count, rst, err)
					}
					if st.Count == 0 {
						return nil
					}
					i := int(binary.LittleEndian.Uint32(buf))
					want := pattern(mtSize(i), i)
					binary.LittleEndian.PutUint32(want, uint32(i))
					if i >= mtMessages || !bytes.Equal(buf, want) {
						return fmt.Errorf("message %d: %d bytes, not the %d sent", i, len(buf), mtSize(i%mtMessages))
					}
					mu.Lock()
					got[i]++
					mu.Unlock()
				}
			}()
		}()
	}
	for range mtGoroutines {
		if err := <-errs; err != nil {
			return err
		}
	}
	for i, n := range got {
		if n != 1 {
			return fmt.Errorf("message %d received %d times", i, n)
		}
	}
	return nil
})

// TestMprobeThreads runs in-process (ranks of Run are ThreadMultiple) and
// as processes that ask InitThread for ThreadMultiple.
func TestMprobeThreads(t *testing.T) {
	setEagerLimit(t, mprobeEager)
	if err := Run(2, func(c *Comm) error {
		if err := scenarios[scMprobeThreads](c); err != nil {
			return err
		}
		return c.Finalize()
	}); err != nil {
		t.Fatal(err)
	}
	runProcesses(t, 2, scMprobeThreads, threadEnv+"="+strconv.Itoa(int(ThreadMultiple)),
		cvar.EnvPrefix+"ENGINE_EAGER_LIMIT="+strconv.Itoa(mprobeEager))
}

// TestInterceptMatchedProbe: tools see Mprobe, Improbe, Mrecv and Imrecv
// once each, the receives with the message's source and tag and the
// Message itself, and the probes' Message in the Result.
func TestInterceptMatchedProbe(t *testing.T) {
	var log callLog
	var mu sync.Mutex
	var seen []string
	tool := func(c *Call, next Handler) error {
		err := log.interceptor(c, next)
		mu.Lock()
		defer mu.Unlock()
		switch c.Op {
		case OpMprobe, OpImprobe:
			seen = append(seen, fmt.Sprintf("%v peer %d tag %d: message %t", c.Op, c.Peer, c.Tag, c.Result.Message != nil))
		case OpMrecv, OpImrecv:
			seen = append(seen, fmt.Sprintf("%v peer %d tag %d bytes %d: message %t", c.Op, c.Peer, c.Tag, c.Bytes, c.Message != nil))
		case OpRecvMessage:
			seen = append(seen, fmt.Sprintf("%v peer %d tag %d: count %d, context %t", c.Op, c.Peer, c.Tag, c.Result.Status.Count, c.Ctx != nil))
		}
		return err
	}
	withInterceptor(t, tool, func() {
		err := Main(2, func(c *Comm) error {
			if c.Rank() == 0 {
				for tag := range 3 {
					if err := c.Send(make([]byte, 4), 1, tag); err != nil {
						return err
					}
				}
				return nil
			}
			m, _, err := c.Mprobe(AnySource, 0)
			if err != nil {
				return err
			}
			if _, err := m.Recv(make([]byte, 8)); err != nil {
				return err
			}
			var ok bool
			for !ok && err == nil {
				m, _, ok, err = c.Improbe(0, AnyTag)
			}
			if err != nil {
				return err
			}
			r, err := m.Irecv(make([]byte, 4))
			if err != nil {
				return err
			}
			if _, err = r.Wait(); err != nil {
				return err
			}
			rv, err := c.RecvMessage(context.Background(), 0, 2)
			if err != nil || rv.Count != 4 || len(rv.Data) != 4 {
				return fmt.Errorf("RecvMessage through a tool: %+v, %d bytes, %v", rv.Status, len(rv.Data), err)
			}
			rv.Release()
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	})
	// Improbe is called until it finds the message: seen as often.
	if got, want := slices.Compact(log.calls[1]), []string{"Mprobe", "Mrecv", "Improbe", "Imrecv", "Wait", "RecvMessage", "Finalize"}; !slices.Equal(got, want) {
		t.Errorf("rank 1 saw %v, want %v", got, want)
	}
	want := []string{
		"Mprobe peer -1 tag 0: message true",
		"Mrecv peer 0 tag 0 bytes 8: message true",
		"Improbe peer 0 tag -1: message true",
		"Imrecv peer 0 tag 1 bytes 4: message true",
		"RecvMessage peer 0 tag 2: count 4, context true",
	}
	var got []string
	for _, s := range seen {
		if !strings.HasSuffix(s, "message false") {
			got = append(got, s)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("tools saw %q, want %q", got, want)
	}
}
