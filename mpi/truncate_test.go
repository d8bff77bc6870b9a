package mpi

import (
	"errors"
	"testing"
)

// TestTruncatedLength: a receive into a buffer shorter than its message,
// blocking, nonblocking and through a layout, returns ErrTruncate with
// the stored count in its status, and TruncatedLength gives the whole
// message's length; other errors and nil give false.
func TestTruncatedLength(t *testing.T) { both(t, 2, scTruncatedLength) }

var scTruncatedLength = scenario("truncated-length", func(c *Comm) error {
	msg := make([]byte, 100)
	if c.Rank() == 0 {
		for tag := range 3 {
			if err := c.Send(msg, 1, tag); err != nil {
				return err
			}
		}
		return nil
	}
	check := func(how string, st Status, err error, stored int) error {
		if !errors.Is(err, ErrTruncate) || st.Count != stored {
			return errors.New(how + ": want ErrTruncate and the stored count")
		}
		if n, ok := TruncatedLength(err); !ok || n != 100 {
			return errors.New(how + ": TruncatedLength does not give 100")
		}
		return nil
	}
	buf := make([]byte, 10)
	st, err := c.Recv(buf, 0, 0)
	if err := check("Recv", st, err, 10); err != nil {
		return err
	}
	r, err := c.Irecv(buf[:7], 0, 1)
	if err != nil {
		return err
	}
	st, err = r.Wait()
	if err := check("Irecv", st, err, 7); err != nil {
		return err
	}
	l, err := Strided(2, 2, 4)
	if err != nil {
		return err
	}
	st, err = c.RecvLayout(buf, l, 0, 2)
	if err := check("RecvLayout", st, err, 4); err != nil {
		return err
	}
	if _, ok := TruncatedLength(ErrRank); ok {
		return errors.New("TruncatedLength(ErrRank) is true")
	}
	if _, ok := TruncatedLength(nil); ok {
		return errors.New("TruncatedLength(nil) is true")
	}
	return nil
})
