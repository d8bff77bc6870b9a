//go:build linux

package mpi

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tachyon-hpc/tachyon/engine"
	"github.com/tachyon-hpc/tachyon/internal/testcvar"
	"github.com/tachyon-hpc/tachyon/nic"
)

// fakeJob is an exchange shared by goroutine ranks, for joinJob without
// a launcher. A rank's view may be tampered with (view): it sees what
// view returns for each gathered table. Once a rank's joinJob failed
// (quit), the others' barriers fail rather than wait for it.
type fakeJob struct {
	n    int
	view func(rank int, key string, vals []string) []string

	mu      sync.Mutex
	cond    *sync.Cond
	kv      map[string]string
	arrived int
	round   int
	dead    bool
	gets    []int
}

func newFakeJob(n int, view func(rank int, key string, vals []string) []string) *fakeJob {
	j := &fakeJob{n: n, view: view, kv: map[string]string{}, gets: make([]int, n)}
	j.cond = sync.NewCond(&j.mu)
	return j
}

// quit marks the job dead: a rank failed and will not come to a barrier.
func (j *fakeJob) quit() {
	j.mu.Lock()
	j.dead = true
	j.cond.Broadcast()
	j.mu.Unlock()
}

// fakeRank is rank's view of a fakeJob: an exchange.
type fakeRank struct {
	j    *fakeJob
	rank int
}

func (x fakeRank) Rank() int { return x.rank }
func (x fakeRank) Size() int { return x.j.n }

func (x fakeRank) Put(key, value string) error {
	x.j.mu.Lock()
	defer x.j.mu.Unlock()
	x.j.kv[key] = value
	return nil
}

func (x fakeRank) Get(key string) (string, error) {
	x.j.mu.Lock()
	defer x.j.mu.Unlock()
	x.j.gets[x.rank]++
	v, ok := x.j.kv[key]
	if !ok {
		return "", fmt.Errorf("nothing under %q", key)
	}
	return v, nil
}

func (x fakeRank) Barrier() error {
	j := x.j
	j.mu.Lock()
	defer j.mu.Unlock()
	round := j.round
	if j.arrived++; j.arrived == j.n {
		j.arrived, j.round = 0, j.round+1
		j.cond.Broadcast()
	}
	for j.round == round && !j.dead {
		j.cond.Wait()
	}
	if j.round == round {
		return errors.New("a rank quit the job")
	}
	return nil
}

// Allgather reads every rank's value as the connection's exchange does
// (its gets are not the point here: pmi's tests count those), and hands
// it through the job's view.
func (x fakeRank) Allgather(key, value string) ([]string, error) {
	x.Put(key+"-"+strconv.Itoa(x.rank), value)
	if err := x.Barrier(); err != nil {
		return nil, err
	}
	x.j.mu.Lock()
	vals := make([]string, x.j.n)
	for r := range vals {
		vals[r] = x.j.kv[key+"-"+strconv.Itoa(r)]
	}
	x.j.mu.Unlock()
	if x.j.view != nil {
		vals = x.j.view(x.rank, key, vals)
	}
	return vals, nil
}

// runFakeJob runs joinJob on every rank of j at once, each rank a host of
// its own (the view of the hosts' table says so) with a UDP link on the
// loopback interface, and returns each rank's error; the ranks that
// joined are released.
func runFakeJob(t *testing.T, j *fakeJob) []error {
	t.Helper()
	return runFakeJobWith(t, j, engine.NetLinkConfig{Interface: "lo", Mode: nic.ModeUDP}, nil)
}

// runFakeJobWith is runFakeJob with the links opened as net says, and
// inspect (if not nil) shown each rank that joined before it is released.
func runFakeJobWith(t *testing.T, j *fakeJob, net engine.NetLinkConfig, inspect func(rank int, p *proc)) []error {
	t.Helper()
	view := j.view
	j.view = func(rank int, key string, vals []string) []string {
		if key == pmiKeyHost {
			vals = slices.Clone(vals)
			for r := range vals {
				if r != rank {
					vals[r] = fmt.Sprintf("fake-host-%d", r)
				}
			}
		}
		if view != nil {
			vals = view(rank, key, vals)
		}
		return vals
	}
	o := joinOptions{net: net}
	errs := make([]error, j.n)
	var wg sync.WaitGroup
	for r := range j.n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, err := joinJob(fakeRank{j, r}, o, "Init", fmt.Sprintf("rank %d of %d of a fake job", r, j.n))
			if err != nil {
				errs[r] = err
				j.quit()
				return
			}
			if inspect != nil {
				inspect(r, p)
			}
			p.release()
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("joinJob still running after a minute")
	}
	return errs
}

// TestJoinJobAcrossFakeHosts: ranks each on a host of its own join over
// the network, gathering their hosts and cards.
func TestJoinJobAcrossFakeHosts(t *testing.T) {
	for i, err := range runFakeJob(t, newFakeJob(3, nil)) {
		if err != nil {
			t.Fatalf("rank %d: %v", i, err)
		}
	}
}

// TestJoinJobBadCard: a peer's card that does not parse, or that says the
// peer could not open its link, fails the ranks that read it with an
// error naming that rank, of class ErrOther, never a panic; a rank given
// another host than its own fails too.
func TestJoinJobBadCard(t *testing.T) {
	for _, tc := range []struct {
		name, card, says string
	}{
		{"malformed", "not-a-card", "reading rank 2's network card"},
		{"card", "garbage,1,2", "reading rank 2's network card"},
		{"none", pmiNone, "rank 2's network card: the rank could not open its network link"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := newFakeJob(3, func(rank int, key string, vals []string) []string {
				if key == pmiKeyCard && rank != 2 {
					vals = slices.Clone(vals)
					vals[2] = tc.card
				}
				return vals
			})
			errs := runFakeJob(t, j)
			for r := range 2 {
				if errs[r] == nil || !strings.Contains(errs[r].Error(), tc.says) || ErrorClass(errs[r]) != ErrOther {
					t.Errorf("rank %d: %v (class %v), want one that says %q", r, errs[r], ErrorClass(errs[r]), tc.says)
				}
			}
		})
	}
	t.Run("own-host", func(t *testing.T) {
		j := newFakeJob(2, func(rank int, key string, vals []string) []string {
			if key == pmiKeyHost && rank == 1 {
				vals = slices.Clone(vals)
				vals[1] = "someone-else"
			}
			return vals
		})
		errs := runFakeJob(t, j)
		if errs[1] == nil || !strings.Contains(errs[1].Error(), "gave this rank (1) the host") {
			t.Fatalf("rank 1: %v", errs[1])
		}
	})
}

// TestJoinJobGets: besides its Allgathers, a rank makes a constant
// number of Gets (the job's cookie and key), whatever the job's size.
func TestJoinJobGets(t *testing.T) {
	for _, n := range []int{2, 8} {
		j := newFakeJob(n, nil)
		for i, err := range runFakeJob(t, j) {
			if err != nil {
				t.Fatalf("%d ranks: rank %d: %v", n, i, err)
			}
		}
		for r, g := range j.gets {
			if g > 2 {
				t.Errorf("%d ranks: rank %d made %d Gets besides its Allgathers, want at most 2", n, r, g)
			}
		}
	}
}

// TestJoinJobInterface: with no interface set, the ranks open their links
// on the interface whose subnet holds their peers' addresses, published
// with their hosts, and the link says why; a peer's addresses that do not
// parse fail the ranks that read them with an error naming that rank.
func TestJoinJobInterface(t *testing.T) {
	testcvar.Set(t, "nic_interface", "")
	const n = 3
	cands, err := nic.LocalCandidates()
	if err != nil {
		t.Fatal(err)
	}
	if len(cands) == 0 {
		// Nothing to choose from: every rank fails, saying so.
		for r, err := range runFakeJobWith(t, newFakeJob(n, nil), engine.NetLinkConfig{Mode: nic.ModeUDP}, nil) {
			if !errors.Is(err, nic.ErrInterface) {
				t.Errorf("rank %d with no interface up: %v, want nic.ErrInterface", r, err)
			}
		}
		return
	}
	ifc := cands[len(cands)-1]
	peerAddr := ifc.Addrs[0] // a peer on the same subnet: this host's own address serves
	j := newFakeJob(n, func(rank int, key string, vals []string) []string {
		if key == pmiKeyHost {
			for r := range vals {
				if r != rank {
					vals[r] += hostSep + peerAddr.String()
				}
			}
		}
		return vals
	})
	chosen := make([]nic.Status, n)
	errs := runFakeJobWith(t, j, engine.NetLinkConfig{Mode: nic.ModeUDP}, func(r int, p *proc) {
		chosen[r], _, _ = p.ep.NetLink()
	})
	want := fmt.Sprintf("%d of %d peers on its subnet %s", n-1, n-1, peerAddr.Masked())
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
		if chosen[r].Interface != ifc.Name || chosen[r].Chosen != want {
			t.Errorf("rank %d: link on %s (%s), want %s (%s)", r, chosen[r].Interface, chosen[r].Chosen, ifc.Name, want)
		}
	}

	j = newFakeJob(n, func(rank int, key string, vals []string) []string {
		if key == pmiKeyHost && rank != 2 {
			vals[2] += hostSep + "not-an-address"
		}
		return vals
	})
	errs = runFakeJobWith(t, j, engine.NetLinkConfig{Mode: nic.ModeUDP}, nil)
	for r := range 2 {
		if errs[r] == nil || !strings.Contains(errs[r].Error(), "reading rank 2's interface addresses") || ErrorClass(errs[r]) != ErrOther {
			t.Errorf("rank %d: %v, want one that names rank 2's addresses", r, errs[r])
		}
	}
}

// TestJoinJobMachine: ranks on hosts of their own (network namespaces,
// say) that share this machine's kernel, more of them than its CPUs,
// make every rank's waits those of an oversubscribed host; ranks on
// other machines do not.
func TestJoinJobMachine(t *testing.T) {
	n := engine.HostCPUs() + 1
	for _, same := range []bool{true, false} {
		j := newFakeJob(n, func(rank int, key string, vals []string) []string {
			if key == pmiKeyHost && same {
				for r := range vals {
					if r != rank {
						vals[r] = engine.MachineOf(engine.HostID()) + fmt.Sprintf("/net:fake-%d", r)
					}
				}
			}
			return vals
		})
		over := make([]bool, n)
		errs := runFakeJobWith(t, j, engine.NetLinkConfig{Mode: nic.ModeUDP, Interface: "lo"}, func(r int, p *proc) {
			over[r] = p.ep.Progress().Oversubscribed()
		})
		for r, err := range errs {
			if err != nil {
				t.Fatalf("rank %d: %v", r, err)
			}
			if over[r] != same {
				t.Errorf("%d ranks, on one machine %v: rank %d oversubscribed %v", n, same, r, over[r])
			}
		}
	}
}
