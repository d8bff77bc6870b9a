// Package prom collects Tachyon's performance variables for Prometheus
// (github.com/prometheus/client_golang), following its naming conventions:
// a counter's name ends in _total, a timer's is in seconds, every name has
// the namespace tachyon_, and each variable's doc is its help text.
//
//	prometheus.MustRegister(prom.NewCollector())
//
// Variables bound to communicators (pvar.BindComm: what each rank's
// endpoint counts) are shown per labeled owner: package mpi labels each
// endpoint with its session's name and its peer (pvar.Owner.SetLabels),
// so such a metric has one series per session and peer, such as
// tachyon_engine_shm_messages_total{session="pricing",peer="10.0.0.7:41822"},
// and one series with empty labels for the rest of the process's value
// (endpoints that carry no labels, and connections closed since: a
// counter's series add up to the process's count, which never goes
// back). Every other variable is one series for the process.
//
// docs/mpit.md (Service metrics) shows it in a service.
package prom

import (
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tachyon-hpc/tachyon/progress"
	"github.com/tachyon-hpc/tachyon/pvar"
)

// Namespace starts every metric's name.
const Namespace = "tachyon"

// Collector reads every performance variable at each scrape. It is an
// unchecked collector (it describes no metrics in advance), since packages
// may register variables after it is: each scrape reports those that
// exist then. Its methods are safe for concurrent use.
type Collector struct{}

// NewCollector returns a collector of every performance variable.
func NewCollector() *Collector { return &Collector{} }

// Describe sends nothing: the collector is unchecked.
func (*Collector) Describe(chan<- *prometheus.Desc) {}

// Collect sends the metrics of every variable: counters, aggregates and
// timers as Prometheus counters, every other class as a gauge. A variable
// bound to communicators gets one series per distinct label set of the
// labeled owners (pvar.Labeled; owners with the same labels are merged
// as pvar.Var.Merge says) and one with empty labels for the rest; its
// label names are those of every labeled owner, sorted, so that every
// series of a metric carries the same names. Without labeled owners, and
// for every other variable, a metric has one series and no labels.
func (*Collector) Collect(ch chan<- prometheus.Metric) {
	ls := labelsOf(pvar.Labeled())
	per := make([]int64, len(ls.owners))
	for _, v := range pvar.All() {
		name, typ, conv := metricOf(v)
		if v.Bind() != pvar.BindComm || len(ls.owners) == 0 {
			ch <- prometheus.MustNewConstMetric(prometheus.NewDesc(name, v.Doc(), nil, nil), typ, conv(v.Read()))
			continue
		}
		desc := prometheus.NewDesc(name, v.Doc(), ls.names, nil)
		rest := v.ReadSplit(ls.owners, per)
		vals := make([]int64, len(ls.sets))
		seen := make([]bool, len(ls.sets))
		for i, x := range per {
			g := ls.set[i]
			if seen[g] {
				x = v.Merge(vals[g], x)
			}
			vals[g], seen[g] = x, true
		}
		ch <- prometheus.MustNewConstMetric(desc, typ, conv(rest), ls.empty...)
		for g, values := range ls.sets {
			ch <- prometheus.MustNewConstMetric(desc, typ, conv(vals[g]), values...)
		}
	}
}

// labelSets is a scrape's labeled owners, grouped by their labels.
type labelSets struct {
	owners []*pvar.Owner
	names  []string   // every label name of any owner, sorted
	empty  []string   // len(names) empty values: the rest's series
	sets   [][]string // the distinct label values, by names
	set    []int      // by owner: its index in sets
}

// labelsOf groups the labeled owners by their labels.
func labelsOf(labeled []pvar.LabeledOwner) labelSets {
	var ls labelSets
	for _, l := range labeled {
		for _, lb := range l.Labels {
			if !slices.Contains(ls.names, lb.Name) {
				ls.names = append(ls.names, lb.Name)
			}
		}
	}
	slices.Sort(ls.names)
	ls.empty = make([]string, len(ls.names))
	index := map[string]int{}
	for _, l := range labeled {
		values := make([]string, len(ls.names))
		for _, lb := range l.Labels {
			values[slices.Index(ls.names, lb.Name)] = lb.Value
		}
		key := strings.Join(values, "\x00")
		g, ok := index[key]
		if !ok {
			g = len(ls.sets)
			index[key] = g
			ls.sets = append(ls.sets, values)
		}
		ls.owners = append(ls.owners, l.Owner)
		ls.set = append(ls.set, g)
	}
	return ls
}

// metricOf returns the Prometheus name and type of variable v, and how
// its values convert to the metric's.
func metricOf(v *pvar.Var) (string, prometheus.ValueType, func(int64) float64) {
	name := Namespace + "_" + v.Name()
	plain := func(x int64) float64 { return float64(x) }
	switch v.Class() {
	case pvar.ClassTimer: // clock counts: seconds, as Prometheus counts time
		return name + "_seconds_total", prometheus.CounterValue, func(x int64) float64 { return progress.CountsToSeconds(uint64(x)) }
	case pvar.ClassCounter, pvar.ClassAggregate:
		if !strings.HasSuffix(name, "_total") {
			name += "_total"
		}
		return name, prometheus.CounterValue, plain
	}
	return name, prometheus.GaugeValue, plain
}
