package expvars

import (
	"encoding/json"
	"expvar"
	"testing"

	"github.com/tachyon-hpc/tachyon/pvar"
)

var testCount = pvar.NewCounter("expvars_test_events", "Events the test counts.")

// TestPublish: the published map holds every performance variable with its
// value as of the read, one registered after Publish included.
func TestPublish(t *testing.T) {
	Publish("tachyon_test")
	testCount.Add(3)
	late := pvar.NewCounter("expvars_test_late", "A variable registered after Publish.")
	late.Add(5)
	var m map[string]int64
	if err := json.Unmarshal([]byte(expvar.Get("tachyon_test").String()), &m); err != nil {
		t.Fatal(err)
	}
	if m["expvars_test_events"] != 3 || m["expvars_test_late"] != 5 || len(m) != len(pvar.All()) {
		t.Fatalf("published %d variables, events %d, late %d; want %d, 3, 5", len(m), m["expvars_test_events"], m["expvars_test_late"], len(pvar.All()))
	}
	testCount.Add(1)
	if err := json.Unmarshal([]byte(expvar.Get("tachyon_test").String()), &m); err != nil || m["expvars_test_events"] != 4 {
		t.Fatalf("a second read: %v, events %d, want 4", err, m["expvars_test_events"])
	}
}
