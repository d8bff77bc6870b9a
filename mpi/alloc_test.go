package mpi

import (
	"testing"
	"unsafe"
)

// TestRequestAllocs guards the message path of the facade: a window of
// Isend and Irecv waited with WaitallInto allocates one small Request per
// operation and nothing else (the engine below allocates nothing).
func TestRequestAllocs(t *testing.T) {
	if n := unsafe.Sizeof(Request{}); n > 32 {
		t.Errorf("Request is %d bytes; the message path allocates one per operation, keep it at 32", n)
	}
	const window = 16
	err := Run(1, func(c *Comm) error {
		buf := make([]byte, 8)
		reqs := make([]*Request, 2*window)
		allocs := testing.AllocsPerRun(200, func() {
			for i := range window {
				reqs[i], _ = c.Irecv(buf, 0, i)
			}
			for i := range window {
				reqs[window+i], _ = c.Isend(buf, 0, i)
			}
			if err := WaitallInto(reqs, nil); err != nil {
				t.Error(err)
			}
		})
		if allocs > 2*window {
			t.Errorf("a window of %d sends and receives allocates %v times, want at most %d", window, allocs, 2*window)
		}
		return c.Finalize()
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestWaitallIntoStatuses(t *testing.T) {
	err := Run(2, func(c *Comm) error {
		peer := 1 - c.Rank()
		r1, err := c.Isend([]byte("hello"), peer, 7)
		if err != nil {
			return err
		}
		r2, err := c.Irecv(make([]byte, 5), peer, 7)
		if err != nil {
			return err
		}
		reqs := []*Request{r1, nil, r2}
		if err := WaitallInto(reqs, make([]Status, 2)); err == nil {
			t.Error("WaitallInto with too few statuses: no error")
		}
		sts := make([]Status, 3)
		if err := WaitallInto(reqs, sts); err != nil {
			return err
		}
		if reqs[0] != nil || reqs[2] != nil {
			t.Error("completed requests not set to nil")
		}
		if sts[2].Source != peer || sts[2].Tag != 7 || sts[2].Count != 5 {
			t.Errorf("receive status %+v", sts[2])
		}
		if sts[1] != emptyStatus {
			t.Errorf("nil request's status %+v", sts[1])
		}
		return c.Finalize()
	})
	if err != nil {
		t.Fatal(err)
	}
}
