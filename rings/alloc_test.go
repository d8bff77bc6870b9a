package rings

import (
	"testing"
)

// The message path allocates nothing: each operation below is measured
// with testing.AllocsPerRun, full and empty cases included, since an
// error return that built its error on the fly would allocate.

func TestCellAllocs(t *testing.T) {
	_, p, c := newCellPair(t, 8, 64)
	msg, buf := make([]byte, 8), make([]byte, 64)
	checkAllocs(t, "TrySend+TryRecv", func() {
		if err := p.TrySend(msg); err != nil {
			t.Fatal(err)
		}
		if n, err := c.TryRecv(buf); n != 8 || err != nil {
			t.Fatal(n, err)
		}
	})
	checkAllocs(t, "Send+Recv", func() {
		if err := p.Send(msg); err != nil {
			t.Fatal(err)
		}
		if n, err := c.Recv(buf); n != 8 || err != nil {
			t.Fatal(n, err)
		}
	})
	checkAllocs(t, "TryRecv empty", func() {
		if _, err := c.TryRecv(buf); err != ErrEmpty {
			t.Fatal(err)
		}
	})
	checkAllocs(t, "Claim/Slot/Commit/Publish+Peek/Message/Release", func() {
		k := p.Claim(4)
		if k != 4 {
			t.Fatal("claimed", k)
		}
		for i := range k {
			copy(p.Slot(i), msg)
			if err := p.Commit(i, len(msg)); err != nil {
				t.Fatal(err)
			}
		}
		p.Publish(k)
		n, err := c.Peek(8)
		if n != 4 || err != nil {
			t.Fatal(n, err)
		}
		for i := range n {
			if len(c.Message(i)) != len(msg) {
				t.Fatal("message", i)
			}
		}
		c.Release(n)
	})
	checkAllocs(t, "Peek empty", func() {
		if n, err := c.Peek(8); n != 0 || err != nil {
			t.Fatal(n, err)
		}
		c.Release(0)
	})
	for range 8 {
		p.TrySend(msg)
	}
	checkAllocs(t, "TrySend full", func() {
		if err := p.TrySend(msg); err != ErrFull {
			t.Fatal(err)
		}
		if p.Claim(1) != 0 {
			t.Fatal("claimed a cell of a full ring")
		}
	})
}

func TestRecordAllocs(t *testing.T) {
	forKinds(t, func(t *testing.T, multi bool) {
		_, w, rd := newRecordPair(t, multi, 1024)
		msg := make([]byte, 40)
		got := 0
		fn := func(typ uint32, p []byte) { got += len(p) }
		checkAllocs(t, "TryWrite+Poll", func() {
			if err := w.TryWrite(7, msg); err != nil {
				t.Fatal(err)
			}
			if n, err := rd.Poll(fn, 10); n != 1 || err != nil {
				t.Fatal(n, err)
			}
		})
		checkAllocs(t, "Claim/Commit+Read", func() {
			b, err := w.Claim(len(msg))
			if err != nil {
				t.Fatal(err)
			}
			copy(b, msg)
			if err := w.Commit(7); err != nil {
				t.Fatal(err)
			}
			if n, err := rd.Read(fn, 10); n != 1 || err != nil {
				t.Fatal(n, err)
			}
		})
		checkAllocs(t, "Poll empty", func() {
			if n, err := rd.Poll(fn, 10); n != 0 || err != nil {
				t.Fatal(n, err)
			}
		})
		if !multi {
			checkAllocs(t, "TryWriteWords+Next/Release", func() {
				for range 3 {
					if err := w.TryWriteWords(7, 1, 2, msg[:8]); err != nil {
						t.Fatal(err)
					}
				}
				k := 0
				for p, err := rd.Next(8); p != nil || err != nil; p, err = rd.Next(8) {
					if err != nil || len(p) != 24 {
						t.Fatal(len(p), err)
					}
					k++
				}
				if k != 3 {
					t.Fatal("Next handed out", k)
				}
				rd.Release(k)
			})
		}
		for w.TryWrite(7, msg) == nil {
		}
		checkAllocs(t, "TryWrite full", func() {
			if err := w.TryWrite(7, msg); err != ErrFull {
				t.Fatal(err)
			}
		})
		if got == 0 {
			t.Fatal("handler never ran")
		}
	})
}

// checkAllocs fails the test if f allocates.
func checkAllocs(t *testing.T, what string, f func()) {
	t.Helper()
	if n := testing.AllocsPerRun(100, f); n != 0 {
		t.Errorf("%s: %v allocations per run, want 0", what, n)
	}
}
