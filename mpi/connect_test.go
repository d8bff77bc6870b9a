package mpi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tachyon-hpc/tachyon/cvar"
)

// twoWorlds runs two in-process worlds at once, of na and nb ranks: a
// accepts on a port its rank 0 opened, b connects to it; each rank runs
// its side's fn with the intercommunicator.
func twoWorlds(t *testing.T, na, nb int, fa, fb func(inter *Comm) error) {
	t.Helper()
	port, err := OpenPort()
	if err != nil {
		t.Fatal(err)
	}
	defer ClosePort(port)
	if !strings.HasPrefix(port, PortPrefix) {
		t.Fatalf("port name %q", port)
	}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	side := func(i, n int, connect bool, fn func(*Comm) error) {
		defer wg.Done()
		errs[i] = Run(n, func(w *Comm) error {
			var inter *Comm
			var err error
			if connect {
				inter, err = w.Connect(port, n-1) // a root other than 0
			} else {
				inter, err = w.Accept(port, 0)
			}
			if err != nil {
				return err
			}
			if err := fn(inter); err != nil {
				return fmt.Errorf("rank %d: %w", w.Rank(), err)
			}
			return inter.Disconnect()
		})
	}
	wg.Add(2)
	go side(0, na, false, fa)
	go side(1, nb, true, fb)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
}

// TestAcceptConnect connects a world of 3 ranks to one of 2: sizes,
// point-to-point between every pair, a barrier over both groups, Merge
// with both orders, Dup and Split.
func TestAcceptConnect(t *testing.T) {
	check := func(inter *Comm, local, remote int, high bool) error {
		if !inter.IsInter() || inter.Size() != local {
			return fmt.Errorf("IsInter %v, Size %d, want an intercommunicator of %d", inter.IsInter(), inter.Size(), local)
		}
		if n, err := inter.RemoteSize(); n != remote || err != nil {
			return fmt.Errorf("RemoteSize %d, %v, want %d", n, err, remote)
		}
		g, err := inter.RemoteGroup()
		if err != nil || g.Size() != remote || g.Rank() != Undefined {
			return fmt.Errorf("RemoteGroup: %v, %v", g, err)
		}
		me := inter.Rank()
		// Every rank sends its rank to every remote rank and hears from each.
		for r := range remote {
			if err := inter.Send([]byte{byte(me)}, r, 5); err != nil {
				return err
			}
		}
		got := make([]bool, remote)
		for range remote {
			b := make([]byte, 1)
			st, err := inter.Recv(b, AnySource, 5)
			if err != nil {
				return err
			}
			if int(b[0]) != st.Source || got[st.Source] {
				return fmt.Errorf("a message from %d saying %d", st.Source, b[0])
			}
			got[st.Source] = true
		}
		if err := inter.Barrier(); err != nil {
			return err
		}
		m, err := inter.Merge(high)
		if err != nil {
			return err
		}
		if m.IsInter() || m.Size() != local+remote {
			return fmt.Errorf("Merge: inter %v, size %d", m.IsInter(), m.Size())
		}
		want := me
		if high {
			want += remote
		}
		if m.Rank() != want {
			return fmt.Errorf("Merge(%v): rank %d, want %d", high, m.Rank(), want)
		}
		if err := m.Barrier(); err != nil {
			return err
		}
		// The merged communicator carries point-to-point too.
		next, prev := (m.Rank()+1)%m.Size(), (m.Rank()+m.Size()-1)%m.Size()
		b := make([]byte, 1)
		if _, err := m.Sendrecv([]byte{byte(m.Rank())}, next, 1, b, prev, 1); err != nil || int(b[0]) != prev {
			return fmt.Errorf("ring on the merged communicator: got %d from %d: %v", b[0], prev, err)
		}
		d, err := inter.Dup()
		if err != nil || !d.IsInter() {
			return fmt.Errorf("Dup: %v", err)
		}
		if err := d.Barrier(); err != nil {
			return err
		}
		// Split: even and odd ranks of each side.
		s, err := inter.Split(me%2, -me)
		if err != nil {
			return err
		}
		wantRemote := (remote + 1 - me%2) / 2
		if me%2 == 1 {
			wantRemote = remote / 2
		}
		if wantRemote == 0 {
			if s != nil {
				return fmt.Errorf("Split: a communicator with no remote rank")
			}
		} else if n, err := s.RemoteSize(); err != nil || n != wantRemote || s.Size() != (local+1-me%2)/2 {
			return fmt.Errorf("Split: size %d, remote %d (%v), want remote %d", s.Size(), n, err, wantRemote)
		} else if s.Rank() != s.Size()-1-me/2 {
			return fmt.Errorf("Split by descending key: rank %d of %d", s.Rank(), s.Size())
		}
		return m.Free()
	}
	twoWorlds(t, 3, 2,
		func(inter *Comm) error { return check(inter, 3, 2, false) },
		func(inter *Comm) error { return check(inter, 2, 3, true) })
}

// TestMergeSameHigh: both groups pass the same high; the accepting group
// comes first.
func TestMergeSameHigh(t *testing.T) {
	merge := func(accepting bool) func(*Comm) error {
		return func(inter *Comm) error {
			m, err := inter.Merge(true)
			if err != nil {
				return err
			}
			want := inter.Rank()
			if !accepting {
				want += 2
			}
			if m.Rank() != want {
				return fmt.Errorf("rank %d, want %d", m.Rank(), want)
			}
			return nil
		}
	}
	twoWorlds(t, 2, 2, merge(true), merge(false))
}

// TestConnectErrors: the routines' arguments and the port's life.
func TestConnectErrors(t *testing.T) {
	err := Run(1, func(w *Comm) error {
		if _, err := w.Accept("tachyon://127.0.0.1:1", 0); !errors.Is(err, ErrPort) {
			return fmt.Errorf("Accept on a port not opened: %v, want ErrPort", err)
		}
		if _, err := w.Accept("x", 1); !errors.Is(err, ErrRank) {
			return fmt.Errorf("Accept with root 1 of 1: %v, want ErrRank", err)
		}
		if _, err := w.Connect("no port", 0); !errors.Is(err, ErrPort) {
			return fmt.Errorf("Connect to a malformed port: %v, want ErrPort", err)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		addr := ln.Addr().String()
		ln.Close()
		if _, err := w.Connect(addr, 0); !errors.Is(err, ErrPort) {
			return fmt.Errorf("Connect where no one listens: %v, want ErrPort", err)
		}
		port, err := OpenPort()
		if err != nil {
			return err
		}
		done := make(chan error, 1)
		go func() {
			_, err := w.Accept(port, 0)
			done <- err
		}()
		time.Sleep(20 * time.Millisecond)
		if err := ClosePort(port); err != nil {
			return err
		}
		if err := <-done; !errors.Is(err, ErrPort) {
			return fmt.Errorf("Accept on a port closed meanwhile: %v, want ErrPort", err)
		}
		if err := ClosePort(port); !errors.Is(err, ErrPort) {
			return fmt.Errorf("ClosePort twice: %v, want ErrPort", err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		port, _ = OpenPort()
		defer ClosePort(port)
		if _, err := w.AcceptContext(ctx, port, 0); !errors.Is(err, ErrCanceled) || !errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("AcceptContext past its deadline: %v, want ErrCanceled and DeadlineExceeded", err)
		}
		if _, err := w.RemoteSize(); !errors.Is(err, ErrComm) {
			return fmt.Errorf("RemoteSize of an intracommunicator: %v, want ErrComm", err)
		}
		if _, err := w.Merge(false); !errors.Is(err, ErrComm) {
			return fmt.Errorf("Merge of an intracommunicator: %v, want ErrComm", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestListenerRefusesStrangers: a client that is not Tachyon, or that
// stalls, costs the listener nothing: the next client is served.
func TestListenerRefusesStrangers(t *testing.T) {
	v, _ := cvar.Lookup("mpi_connect_timeout")
	old := v.String()
	if err := cvar.Set("mpi_connect_timeout", "200ms"); err != nil {
		t.Fatal(err)
	}
	defer cvar.Set("mpi_connect_timeout", old)
	srv, cli := newTestSession(t), newTestSession(t)
	ln, err := srv.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	addr := ln.Addr().String()
	junk, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	junk.Write([]byte("GET / HTTP/1.0\r\n\r\n"))
	defer junk.Close()
	stall, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer stall.Close()
	// Junk is answered by a closed connection (an end, or a reset for
	// the junk left unread): what comes before it is read, and it must
	// come before the deadline.
	junk.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadAll(junk); isTimeout(err) {
		t.Fatalf("the listener kept a junk connection open: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	go func() {
		c, err := ln.Accept(ctx)
		if err == nil {
			c.Recv(nil, 0, 0)
			c.Send(nil, 0, 0)
		}
	}()
	c, err := cli.Dial(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Send(nil, 0, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Recv(nil, 0, 0); err != nil {
		t.Fatal(err)
	}
	// The stalled client is dropped after mpi_connect_timeout.
	stall.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := stall.Read(make([]byte, 1)); err == nil || errors.Is(err, context.DeadlineExceeded) || isTimeout(err) {
		t.Fatalf("the stalled client's connection: %v, want it closed", err)
	}
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := ln.Accept(ctx); !errors.Is(err, ErrPort) || !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept on a closed listener: %v, want ErrPort and net.ErrClosed", err)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// TestNameService publishes a port, looks it up, and connects through
// the name.
func TestNameService(t *testing.T) {
	dir := t.TempDir()
	v, _ := cvar.Lookup("mpi_name_dir")
	old := v.String()
	cvar.Set("mpi_name_dir", dir)
	defer cvar.Set("mpi_name_dir", old)
	port, err := OpenPort()
	if err != nil {
		t.Fatal(err)
	}
	defer ClosePort(port)
	const service = "tachyon test/service"
	if _, err := LookupName(service); !errors.Is(err, ErrName) {
		t.Fatalf("LookupName before PublishName: %v, want ErrName", err)
	}
	if err := PublishName(service, port); err != nil {
		t.Fatal(err)
	}
	if err := PublishName(service, port); !errors.Is(err, ErrService) {
		t.Fatalf("PublishName twice: %v, want ErrService", err)
	}
	got, err := LookupName(service)
	if err != nil || got != port {
		t.Fatalf("LookupName = %q, %v; want %q", got, err, port)
	}
	if err := UnpublishName(service, "tachyon://127.0.0.1:1"); !errors.Is(err, ErrService) {
		t.Fatalf("UnpublishName of another port: %v, want ErrService", err)
	}
	if err := UnpublishName(service, port); err != nil {
		t.Fatal(err)
	}
	if _, err := LookupName(service); !errors.Is(err, ErrName) {
		t.Fatalf("LookupName after UnpublishName: %v, want ErrName", err)
	}
	// A name left by a process that ended counts as unpublished.
	if err := writeExclusive(dir+"/stale", "1 1\ntachyon://127.0.0.1:1\n"); err != nil {
		t.Fatal(err)
	}
	if _, err := LookupName("stale"); !errors.Is(err, ErrName) {
		t.Fatalf("LookupName of a dead publisher's name: %v, want ErrName", err)
	}
	if err := PublishName("stale", port); err != nil {
		t.Fatalf("PublishName over a dead publisher's name: %v", err)
	}
	UnpublishName("stale", port)
}

// Two jobs of processes, started apart, meet through the name service:
// the first publishes a port its rank 0 opened and accepts on it, the
// second looks the name up and connects (scenarios accept-job and
// connect-job, MPI_TEST_SERVICE naming the service).
const serviceEnv = "MPI_TEST_SERVICE"

var scAcceptJob = scenario("accept-job", func(w *Comm) error {
	inter, err := acceptService(w)
	if err != nil {
		return err
	}
	return jobsTalk(inter, false)
})

var scConnectJob = scenario("connect-job", func(w *Comm) error {
	inter, err := connectService(w)
	if err != nil {
		return err
	}
	return jobsTalk(inter, true)
})

// acceptService publishes, under the name serviceEnv gives, a port w's
// rank 0 opened, and accepts a connection on it over w.
func acceptService(w *Comm) (*Comm, error) {
	service := os.Getenv(serviceEnv)
	var port string
	if w.Rank() == 0 {
		var err error
		if port, err = OpenPort(); err != nil {
			return nil, err
		}
		defer ClosePort(port)
		if err := PublishName(service, port); err != nil {
			return nil, err
		}
		defer UnpublishName(service, port)
	}
	return w.Accept(port, 0)
}

// connectService looks up the name serviceEnv gives and connects w to
// the port published under it.
func connectService(w *Comm) (*Comm, error) {
	service := os.Getenv(serviceEnv)
	var port string
	if w.Rank() == 0 {
		// The other job may not have published yet.
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			p, err := LookupName(service)
			if err == nil {
				port = p
				break
			}
			if !errors.Is(err, ErrName) || time.Now().After(deadline) {
				return nil, err
			}
		}
	}
	return w.Connect(port, 0)
}

// jobsTalk checks a connection between two jobs: sizes, a message from
// every rank to every remote rank, a barrier across, and the merged
// communicator's ring.
func jobsTalk(inter *Comm, connecting bool) error {
	remote, err := inter.RemoteSize()
	if err != nil {
		return err
	}
	me := inter.Rank()
	for r := range remote {
		if err := inter.Send([]byte{byte(me), byte(r)}, r, 3); err != nil {
			return err
		}
	}
	b := make([]byte, 2)
	for range remote {
		st, err := inter.Recv(b, AnySource, 3)
		if err != nil {
			return err
		}
		if int(b[0]) != st.Source || int(b[1]) != me {
			return fmt.Errorf("rank %d: a message from %d saying %v", me, st.Source, b)
		}
	}
	if err := inter.Barrier(); err != nil {
		return err
	}
	m, err := inter.Merge(connecting)
	if err != nil {
		return err
	}
	next, prev := (m.Rank()+1)%m.Size(), (m.Rank()+m.Size()-1)%m.Size()
	if _, err := m.Sendrecv([]byte{byte(m.Rank())}, next, 1, b[:1], prev, 1); err != nil || int(b[0]) != prev {
		return fmt.Errorf("ring on the merged communicator: %d from %d: %v", b[0], prev, err)
	}
	if m.Size() != 5 {
		return fmt.Errorf("merged communicator of %d ranks, want 5", m.Size())
	}
	return inter.Disconnect()
}

// TestJobsConnect: two jobs of processes started apart connect through a
// published name, collectively (Comm.Accept and Comm.Connect over
// several ranks each), and talk across.
func TestJobsConnect(t *testing.T) {
	serviceJobs(t, "jobs", [2]int{3, 2}, [2]string{scAcceptJob, scConnectJob})
}

// serviceJobs runs two jobs of processes at once, of sizes n and
// scenarios names (the accepting one first), meeting through a service
// named after label.
func serviceJobs(t *testing.T, label string, n [2]int, names [2]string) {
	t.Helper()
	env := []string{serviceEnv + "=" + fmt.Sprintf("%s-%d-%d", label, os.Getpid(), time.Now().UnixNano()),
		"TACHYON_MPI_NAME_DIR=" + t.TempDir()}
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runProcesses(t, n[i], names[i], env...)
		}()
	}
	wg.Wait()
}
