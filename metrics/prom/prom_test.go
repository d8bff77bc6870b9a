package prom

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/tachyon-hpc/tachyon/pvar"
)

var (
	testEvents = pvar.NewCounter("prom_test_events", "Events the test counts.", pvar.WithUnit("events"))
	testQueue  = pvar.NewLevel("prom_test_queue", "Messages the test queues.")
)

// TestCollector: every variable is scraped, under Prometheus' names and
// types, with its doc as help, at its value of the moment, a variable
// registered after the collector included; and the collector passes the
// client library's lint.
func TestCollector(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	c := NewCollector()
	reg.MustRegister(c)
	testEvents.Add(7)
	testQueue.Add(3)
	late := pvar.NewHighWatermark("prom_test_late_peak", "A variable registered after the collector.")
	late.Observe(11)
	want := `
# HELP tachyon_prom_test_events_total Events the test counts.
# TYPE tachyon_prom_test_events_total counter
tachyon_prom_test_events_total 7
# HELP tachyon_prom_test_late_peak A variable registered after the collector.
# TYPE tachyon_prom_test_late_peak gauge
tachyon_prom_test_late_peak 11
# HELP tachyon_prom_test_queue Messages the test queues.
# TYPE tachyon_prom_test_queue gauge
tachyon_prom_test_queue 3
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"tachyon_prom_test_events_total", "tachyon_prom_test_late_peak", "tachyon_prom_test_queue"); err != nil {
		t.Fatal(err)
	}
	if n, err := testutil.GatherAndCount(reg); err != nil || n != len(pvar.All()) {
		t.Fatalf("%d metrics (%v), want one a variable: %d", n, err, len(pvar.All()))
	}
	if problems, err := testutil.CollectAndLint(c); err != nil {
		t.Fatal(err)
	} else {
		for _, p := range problems {
			if strings.HasPrefix(p.Metric, "tachyon_prom_test") {
				t.Errorf("lint: %s: %s", p.Metric, p.Text)
			}
		}
	}
}
