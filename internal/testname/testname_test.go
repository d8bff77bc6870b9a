package testname

import "testing"

// TestUniq: a name comes back as is the first time, numbered after, each
// name counted on its own (under names new to this run, so that go test
// -count can run it again).
func TestUniq(t *testing.T) {
	run := Uniq("testname_run")
	a, b := run+"/a", run+"/b"
	got := []string{Uniq(a), Uniq(a), Uniq(b), Uniq(a)}
	want := []string{a, a + "_2", b, a + "_3"}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("call %d: %q, want %q", i, got[i], want[i])
		}
	}
}
