// Package prom collects Tachyon's performance variables for Prometheus
// (github.com/prometheus/client_golang), following its naming conventions:
// a counter's name ends in _total, a timer's is in seconds, every name has
// the namespace tachyon_, and each variable's doc is its help text.
//
//	prometheus.MustRegister(prom.NewCollector())
package prom

import (
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
// exist then.
type Collector struct{}

// NewCollector returns a collector of every performance variable.
func NewCollector() *Collector { return &Collector{} }

// Describe sends nothing: the collector is unchecked.
func (*Collector) Describe(chan<- *prometheus.Desc) {}

// Collect sends one metric a variable: counters, aggregates and timers as
// Prometheus counters, every other class as a gauge.
func (*Collector) Collect(ch chan<- prometheus.Metric) {
	for _, v := range pvar.All() {
		name, typ, value := metricOf(v)
		desc := prometheus.NewDesc(name, v.Doc(), nil, nil)
		ch <- prometheus.MustNewConstMetric(desc, typ, value)
	}
}

// metricOf returns the Prometheus name, type and value of variable v.
func metricOf(v *pvar.Var) (string, prometheus.ValueType, float64) {
	name := Namespace + "_" + v.Name()
	value := float64(v.Read())
	switch v.Class() {
	case pvar.ClassTimer: // clock counts: seconds, as Prometheus counts time
		value = progress.CountsToSeconds(uint64(v.Read()))
		return name + "_seconds_total", prometheus.CounterValue, value
	case pvar.ClassCounter, pvar.ClassAggregate:
		if !strings.HasSuffix(name, "_total") {
			name += "_total"
		}
		return name, prometheus.CounterValue, value
	}
	return name, prometheus.GaugeValue, value
}
