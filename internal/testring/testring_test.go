package testring

import (
	"errors"
	"strings"
	"testing"
)

// TestPass: a ring of three, played by one goroutine through a mailbox
// per rank: every rank's Pass succeeds when the messages go round, and
// fails, naming what came, when one goes astray.
func TestPass(t *testing.T) {
	const n = 3
	box := make([][]byte, n)
	send := func(from int, wrong bool) {
		to := (from + 1) % n
		if wrong {
			to = (from + 2) % n
		}
		box[to] = []byte("from " + string(rune('0'+from)))
	}
	recvOf := func(me int) func([]byte, int, []byte, int) (int, error) {
		return func(_ []byte, _ int, recv []byte, _ int) (int, error) { return copy(recv, box[me]), nil }
	}
	barrier := func() error { return nil }
	for me := range n {
		send(me, false)
	}
	for me := range n {
		if err := Pass(me, n, recvOf(me), barrier); err != nil {
			t.Errorf("rank %d: %v", me, err)
		}
	}
	box = make([][]byte, n)
	send(0, true) // rank 0's message reaches rank 2, not rank 1
	if err := Pass(2, n, recvOf(2), barrier); err == nil || !strings.Contains(err.Error(), `got "from 0", want "from 1"`) {
		t.Errorf("a message from the wrong rank: %v", err)
	}
	failed := errors.New("barrier failed")
	if err := Pass(0, 1, func(s []byte, _ int, r []byte, _ int) (int, error) { return copy(r, s), nil }, func() error { return failed }); !errors.Is(err, failed) {
		t.Errorf("a failed barrier: %v", err)
	}
}
