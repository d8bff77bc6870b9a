package prom

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/tachyon-hpc/tachyon/internal/testname"
	"github.com/tachyon-hpc/tachyon/pvar"
)

// TestCollector: every variable is scraped, under Prometheus' names and
// types, with its doc as help, at its value of the moment, a variable
// registered after the collector included; and the collector passes the
// client library's lint.
func TestCollector(t *testing.T) {
	eventsName, queueName, lateName := testname.Uniq("prom_test_events"), testname.Uniq("prom_test_queue"), testname.Uniq("prom_test_late_peak")
	testEvents := pvar.NewCounter(eventsName, "Events the test counts.", pvar.WithUnit("events"))
	testQueue := pvar.NewLevel(queueName, "Messages the test queues.")
	reg := prometheus.NewPedanticRegistry()
	c := NewCollector()
	reg.MustRegister(c)
	testEvents.Add(7)
	testQueue.Add(3)
	late := pvar.NewHighWatermark(lateName, "A variable registered after the collector.")
	late.Observe(11)
	// Their metrics' names: tachyon_prom_test_events_total and so on in the
	// first run, with testname.Uniq's suffix before _total in the runs after.
	events, peak, queue := "tachyon_"+eventsName+"_total", "tachyon_"+lateName, "tachyon_"+queueName
	want := strings.NewReplacer("EVENTS", events, "PEAK", peak, "QUEUE", queue).Replace(`
# HELP EVENTS Events the test counts.
# TYPE EVENTS counter
EVENTS 7
# HELP PEAK A variable registered after the collector.
# TYPE PEAK gauge
PEAK 11
# HELP QUEUE Messages the test queues.
# TYPE QUEUE gauge
QUEUE 3
`)
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), events, peak, queue); err != nil {
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
