package prom

import (
	"context"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/tachyon-hpc/tachyon/internal/testname"
	"github.com/tachyon-hpc/tachyon/mpi"
	"github.com/tachyon-hpc/tachyon/pvar"
)

// TestCollectorLabels: a variable bound to communicators has one series
// per distinct label set of the labeled owners (owners with the same
// labels merged) and one with empty labels for the rest, all with the
// same label names; a variable kept for the process has one series and
// no labels.
func TestCollectorLabels(t *testing.T) {
	boundName, plainName, hwmName := testname.Uniq("prom_test_bound"), testname.Uniq("prom_test_plain"), testname.Uniq("prom_test_bound_hwm")
	bound := pvar.NewCounter(boundName, "A counter kept per rank.", pvar.WithBind(pvar.BindComm))
	hwm := pvar.NewHighWatermark(hwmName, "A watermark kept per rank.", pvar.WithBind(pvar.BindComm))
	plain := pvar.NewCounter(plainName, "A counter of the process.")
	o1, o2, o3, o4 := pvar.NewOwner(), pvar.NewOwner(), pvar.NewOwner(), pvar.NewOwner()
	for _, l := range []struct {
		o             *pvar.Owner
		session, peer string
	}{{o1, "a", "world"}, {o2, "a", "10.0.0.7:41822"}, {o3, "a", "world"}} {
		if err := l.o.SetLabels(map[string]string{"session": l.session, "peer": l.peer}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(l.o.Unlabel)
	}
	if err := o4.SetLabels(map[string]string{"session": "b"}); err != nil { // no peer: empty in its series
		t.Fatal(err)
	}
	t.Cleanup(o4.Unlabel)
	bound.ShardOf(o1).Add(1)
	bound.ShardOf(o2).Add(2)
	bound.ShardOf(o3).Add(4)
	bound.ShardOf(o4).Add(8)
	bound.ShardOf(pvar.NewOwner()).Add(16) // unlabeled: the rest
	bound.Add(32)
	hwm.ShardOf(o1).Observe(5)
	hwm.ShardOf(o3).Observe(3)
	hwm.ShardOf(pvar.NewOwner()).Observe(7)
	plain.Add(3)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(NewCollector())
	b, h, p := "tachyon_"+boundName+"_total", "tachyon_"+hwmName, "tachyon_"+plainName+"_total"
	want := strings.NewReplacer("BOUND", b, "HWM", h, "PLAIN", p).Replace(`
# HELP BOUND A counter kept per rank.
# TYPE BOUND counter
BOUND{peer="",session=""} 48
BOUND{peer="",session="b"} 8
BOUND{peer="10.0.0.7:41822",session="a"} 2
BOUND{peer="world",session="a"} 5
# HELP HWM A watermark kept per rank.
# TYPE HWM gauge
HWM{peer="",session=""} 7
HWM{peer="",session="b"} 0
HWM{peer="10.0.0.7:41822",session="a"} 0
HWM{peer="world",session="a"} 5
# HELP PLAIN A counter of the process.
# TYPE PLAIN counter
PLAIN 3
`)
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), b, h, p); err != nil {
		t.Fatal(err)
	}
}

// series is one gathered series: its labels and value.
type series struct {
	labels map[string]string
	value  float64
}

// gather scrapes g and returns its series by metric name.
func gather(t *testing.T, g prometheus.Gatherer) map[string][]series {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]series{}
	for _, f := range mfs {
		for _, m := range f.GetMetric() {
			s := series{labels: map[string]string{}}
			for _, l := range m.GetLabel() {
				s.labels[l.GetName()] = l.GetValue()
			}
			if c := m.GetCounter(); c != nil {
				s.value = c.GetValue()
			} else {
				s.value = m.GetGauge().GetValue()
			}
			out[f.GetName()] = append(out[f.GetName()], s)
		}
	}
	return out
}

// connect makes two standalone sessions of this process, srv and cli,
// and connects them: cli dials srv's listener. It returns the server's
// and the client's communicators and the listener's address.
func connect(t *testing.T, srv, cli *mpi.Session) (*mpi.Comm, *mpi.Comm, string) {
	t.Helper()
	ln, err := srv.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	accepted := make(chan *mpi.Comm, 1)
	go func() {
		c, err := ln.Accept(ctx)
		if err != nil {
			t.Error("Accept:", err)
		}
		accepted <- c
	}()
	cc, err := cli.Dial(ctx, ln.Addr().String())
	if err != nil {
		t.Fatal("Dial:", err)
	}
	sc := <-accepted
	if sc == nil {
		t.FailNow()
	}
	return sc, cc, ln.Addr().String()
}

func newSession(t *testing.T, name string) *mpi.Session {
	t.Helper()
	s, err := mpi.NewSession(mpi.WithStandalone(), mpi.WithName(name), mpi.WithStat(false))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	return s
}

// TestCollectorSessions: two sessions of one process connected by Listen
// and Dial show, for each variable kept per rank, a series per session
// and peer ("world" for each session's world, the other side's address
// for each end of the connection) and the rest; a counter's series add
// up to the process's count, before and after the connection closes.
func TestCollectorSessions(t *testing.T) {
	srv, cli := newSession(t, "prom-srv"), newSession(t, "prom-cli")
	sc, cc, addr := connect(t, srv, cli)
	const n = 50
	buf := make([]byte, 64)
	for i := range n {
		if err := cc.Send(buf, 0, i); err != nil {
			t.Fatal(err)
		}
		if _, err := sc.Recv(buf, 0, i); err != nil {
			t.Fatal(err)
		}
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(NewCollector())
	all := gather(t, reg)
	polls := all["tachyon_progress_polls_total"]
	if polls == nil {
		t.Fatal("no tachyon_progress_polls_total")
	}
	var sets []string
	clientPeer := ""
	for _, m := range polls {
		l := m.labels
		if len(l) != 2 {
			t.Fatalf("series %v: want the labels session and peer", l)
		}
		if l["session"] == "prom-srv" && l["peer"] != "world" {
			clientPeer = l["peer"]
			l["peer"] = "CLIENT"
		}
		sets = append(sets, l["session"]+" "+l["peer"])
	}
	slices.Sort(sets)
	if want := []string{" ", "prom-cli " + addr, "prom-cli world", "prom-srv CLIENT", "prom-srv world"}; !slices.Equal(sets, want) {
		t.Fatalf("series of tachyon_progress_polls_total: %q, want %q", sets, want)
	}
	if !strings.HasPrefix(clientPeer, "127.0.0.1:") || clientPeer == addr {
		t.Fatalf("the server's peer %q: want the client's address on 127.0.0.1", clientPeer)
	}
	// The messages the client sent are its connection's; the series of
	// every transport's count add up to the process's count.
	sent := 0.0
	sum := func(all map[string][]series) map[string]float64 {
		sums := map[string]float64{}
		for name, ss := range all {
			if !strings.HasPrefix(name, "tachyon_engine_") || !strings.HasSuffix(name, "_messages_total") {
				continue
			}
			for _, m := range ss {
				sums[name] += m.value
				if m.labels["session"] == "prom-cli" && m.labels["peer"] == addr {
					sent += m.value
				}
			}
		}
		return sums
	}
	before := sum(all)
	if sent < n {
		t.Fatalf("the client's connection sent %v messages, want at least %d", sent, n)
	}
	for name, x := range before {
		v, _ := pvar.Lookup(strings.TrimSuffix(strings.TrimPrefix(name, "tachyon_"), "_total"))
		if v == nil || float64(v.Read()) != x {
			t.Errorf("%s: the series add up to %v, the process counted %v", name, x, v.Read())
		}
	}
	// Closed, the connection's series go, its counts to the rest.
	if err := cc.Disconnect(); err != nil {
		t.Fatal(err)
	}
	sc.Disconnect()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cli.Close(ctx); err != nil {
		t.Fatal(err)
	}
	all = gather(t, reg)
	after := sum(all)
	for name, x := range before {
		if after[name] < x {
			t.Errorf("%s went back from %v to %v", name, x, after[name])
		}
	}
	for _, m := range all["tachyon_progress_polls_total"] {
		if l := m.labels; l["session"] == "prom-cli" || l["peer"] != "world" && l["peer"] != "" {
			t.Errorf("a series of a closed session or connection: %v", l)
		}
	}
}

// TestCollectorScrapeRace: scrapes while sessions connect, exchange and
// disconnect are consistent and race-free (run it with -race).
func TestCollectorScrapeRace(t *testing.T) {
	srv := newSession(t, "race-srv")
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewCollector())
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	scrapes := 0
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			mfs, err := reg.Gather()
			if err != nil {
				t.Error(err)
				return
			}
			for _, f := range mfs {
				for _, m := range f.GetMetric() {
					if c := m.GetCounter(); c != nil && (c.GetValue() < 0 || math.IsNaN(c.GetValue())) {
						t.Errorf("%s %v = %v", f.GetName(), m.GetLabel(), c.GetValue())
					}
				}
			}
			scrapes++
		}
	}()
	for i := range 4 {
		cli := newSession(t, "race-cli")
		sc, cc, _ := connect(t, srv, cli)
		if err := cc.Send([]byte{byte(i)}, 0, 1); err != nil {
			t.Fatal(err)
		}
		if _, err := sc.Recv(make([]byte, 1), 0, 1); err != nil {
			t.Fatal(err)
		}
		cc.Disconnect()
		sc.Disconnect()
		if err := cli.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	if scrapes == 0 {
		t.Fatal("no scrape ran")
	}
}
