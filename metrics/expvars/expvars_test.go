package expvars

import (
	"encoding/json"
	"expvar"
	"testing"

	"github.com/tachyon-hpc/tachyon/internal/testname"
	"github.com/tachyon-hpc/tachyon/pvar"
)

// TestPublish: the published map holds every performance variable with its
// value as of the read, one registered after Publish included.
func TestPublish(t *testing.T) {
	events, lateName, published := testname.Uniq("expvars_test_events"), testname.Uniq("expvars_test_late"), testname.Uniq("tachyon_test")
	count := pvar.NewCounter(events, "Events the test counts.")
	Publish(published)
	count.Add(3)
	late := pvar.NewCounter(lateName, "A variable registered after Publish.")
	late.Add(5)
	var m map[string]int64
	if err := json.Unmarshal([]byte(expvar.Get(published).String()), &m); err != nil {
		t.Fatal(err)
	}
	if m[events] != 3 || m[lateName] != 5 || len(m) != len(pvar.All()) {
		t.Fatalf("published %d variables, events %d, late %d; want %d, 3, 5", len(m), m[events], m[lateName], len(pvar.All()))
	}
	count.Add(1)
	if err := json.Unmarshal([]byte(expvar.Get(published).String()), &m); err != nil || m[events] != 4 {
		t.Fatalf("a second read: %v, events %d, want 4", err, m[events])
	}
}
