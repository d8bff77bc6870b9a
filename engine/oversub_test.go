package engine

import "testing"

func TestCountCPUList(t *testing.T) {
	for s, want := range map[string]int{"0": 1, "0-1": 2, "0-3,6": 5, "0-3,8-11": 8, "": 7, "x": 7, "3-1": 7} {
		if got := countCPUList(s, 7); got != want {
			t.Errorf("countCPUList(%q) = %d, want %d", s, got, want)
		}
	}
}
