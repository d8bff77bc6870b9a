package profile_test

import (
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/tachyon-hpc/tachyon/examples/profile"
	"github.com/tachyon-hpc/tachyon/internal/testrole"
	"github.com/tachyon-hpc/tachyon/mpi"
)

// tables splits the profiler's output into the tables of each rank, in
// the order printed.
func tables(out string) map[int][]map[string][]string {
	all := map[int][]map[string][]string{}
	for _, block := range strings.Split(out, "\n\n") {
		lines := strings.Split(strings.TrimSpace(block), "\n")
		var rank int
		if _, err := fmt.Sscanf(lines[0], "profile of rank %d:", &rank); err != nil {
			continue
		}
		rows := map[string][]string{}
		for _, l := range lines[1:] {
			f := strings.Fields(l)
			switch {
			case len(f) == 4: // operation calls bytes time
				rows[f[0]] = f[1:]
			case len(f) == 6: // communicator peer sent sent_bytes received received_bytes
				rows[f[0]+" "+f[1]] = f[2:]
			}
		}
		all[rank] = append(all[rank], rows)
	}
	return all
}

// wantRow checks that row key of rows starts with want.
func wantRow(t *testing.T, rank int, rows map[string][]string, key string, want ...string) {
	t.Helper()
	got, ok := rows[key]
	if !ok {
		t.Errorf("rank %d: no row %q", rank, key)
		return
	}
	if len(got) < len(want) || strings.Join(got[:len(want)], " ") != strings.Join(want, " ") {
		t.Errorf("rank %d: row %q = %v, want %v first", rank, key, got, want)
	}
}

// TestCountsSends: N sends of B bytes from rank 0 to rank 1 are N calls,
// N messages and N*B bytes on both sides, in the tables printed at
// Finalize.
func TestCountsSends(t *testing.T) {
	const n, b, tag = 25, 100, 7
	var out testrole.Output
	remove := install(t, &out)
	defer remove()
	err := mpi.Main(2, func(c *mpi.Comm) error {
		buf := make([]byte, b)
		for i := 0; i < n; i++ {
			var err error
			if c.Rank() == 0 {
				err = c.Send(buf, 1, tag)
			} else {
				_, err = c.Recv(make([]byte, 2*b), 0, tag) // a larger buffer: counted is what came
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	all := tables(out.String())
	if len(all[0]) != 1 || len(all[1]) != 1 {
		t.Fatalf("want one table for each of ranks 0 and 1, got:\n%s", out.String())
	}
	r0, r1 := all[0][0], all[1][0]
	wantRow(t, 0, r0, "Send", fmt.Sprint(n), fmt.Sprint(n*b))
	wantRow(t, 0, r0, "MPI_COMM_WORLD 1", fmt.Sprint(n), fmt.Sprint(n*b), "0", "0")
	wantRow(t, 1, r1, "Recv", fmt.Sprint(n), fmt.Sprint(n*b))
	wantRow(t, 1, r1, "MPI_COMM_WORLD 0", "0", "0", fmt.Sprint(n), fmt.Sprint(n*b))
	if _, ok := r0["Recv"]; ok {
		t.Errorf("rank 0 has a Recv row:\n%s", out.String())
	}
}

// TestCountsNonblocking: receives posted with Irecv count where they
// complete, with the size and source their statuses give.
func TestCountsNonblocking(t *testing.T) {
	const n, b = 8, 64
	var out testrole.Output
	remove := install(t, &out)
	defer remove()
	err := mpi.Main(3, func(c *mpi.Comm) error {
		buf := make([]byte, b)
		switch c.Rank() {
		case 0: // receives n from each of 1 and 2, half by Waitall, half by Wait
			reqs := make([]*mpi.Request, 0, 2*n)
			for i := 0; i < 2*n; i++ {
				r, err := c.Irecv(make([]byte, 4*b), mpi.AnySource, 0)
				if err != nil {
					return err
				}
				reqs = append(reqs, r)
			}
			if _, err := mpi.Waitall(reqs[:n]); err != nil {
				return err
			}
			for _, r := range reqs[n:] {
				if _, err := r.Wait(); err != nil {
					return err
				}
			}
		default:
			reqs := make([]*mpi.Request, n)
			for i := range reqs {
				var err error
				if reqs[i], err = c.Isend(buf, 0, 0); err != nil {
					return err
				}
			}
			if err := mpi.WaitallInto(reqs, nil); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	all := tables(out.String())
	r0 := all[0][0]
	wantRow(t, 0, r0, "Irecv", fmt.Sprint(2*n), "0")
	wantRow(t, 0, r0, "MPI_COMM_WORLD 1", "0", "0", fmt.Sprint(n), fmt.Sprint(n*b))
	wantRow(t, 0, r0, "MPI_COMM_WORLD 2", "0", "0", fmt.Sprint(n), fmt.Sprint(n*b))
	waitall, wait := r0["Waitall"], r0["Wait"]
	if len(waitall) < 2 || len(wait) < 2 {
		t.Fatalf("rank 0: no Wait or Waitall row:\n%s", out.String())
	}
	var got int
	fmt.Sscan(waitall[1], &got)
	var more int
	fmt.Sscan(wait[1], &more)
	if got+more != 2*n*b || wait[0] != fmt.Sprint(n) {
		t.Errorf("rank 0: Waitall %v and Wait %v, want %d bytes between them and %d Waits", waitall, wait, 2*n*b, n)
	}
	for r := 1; r <= 2; r++ {
		wantRow(t, r, all[r][0], "Isend", fmt.Sprint(n), fmt.Sprint(n*b))
		wantRow(t, r, all[r][0], "MPI_COMM_WORLD 0", fmt.Sprint(n), fmt.Sprint(n*b), "0", "0")
	}
}

// TestPcontrol: between Pcontrol(0) and Pcontrol(1) nothing is counted,
// and Pcontrol(2) prints every rank's table at once.
func TestPcontrol(t *testing.T) {
	const off, on, b = 5, 3, 10
	var out testrole.Output
	remove := install(t, &out)
	defer remove()
	exchange := func(c *mpi.Comm, k int) error {
		buf := make([]byte, b)
		for i := 0; i < k; i++ {
			var err error
			if c.Rank() == 0 {
				err = c.Send(buf, 1, 0)
			} else {
				_, err = c.Recv(buf, 0, 0)
			}
			if err != nil {
				return err
			}
		}
		return nil
	}
	// Pcontrol acts on the process: rank 0 turns it, and barriers keep
	// rank 1's calls on the same side of each turn.
	err := mpi.Main(2, func(c *mpi.Comm) error {
		step := func(f func() error) error {
			if err := c.Barrier(); err != nil {
				return err
			}
			if c.Rank() == 0 {
				if err := f(); err != nil {
					return err
				}
			}
			return c.Barrier()
		}
		if err := step(func() error { return mpi.Pcontrol(0) }); err != nil {
			return err
		}
		if err := exchange(c, off); err != nil {
			return err
		}
		if err := step(func() error { return mpi.Pcontrol(1) }); err != nil {
			return err
		}
		if err := exchange(c, on); err != nil {
			return err
		}
		return step(func() error { return mpi.Pcontrol(2) })
	})
	if err != nil {
		t.Fatal(err)
	}
	all := tables(out.String())
	for r := 0; r < 2; r++ {
		if len(all[r]) != 2 {
			t.Fatalf("rank %d: want a table at Pcontrol(2) and one at Finalize, got:\n%s", r, out.String())
		}
	}
	for k := 0; k < 2; k++ {
		wantRow(t, 0, all[0][k], "Send", fmt.Sprint(on), fmt.Sprint(on*b))
		wantRow(t, 0, all[0][k], "MPI_COMM_WORLD 1", fmt.Sprint(on), fmt.Sprint(on*b), "0", "0")
		wantRow(t, 1, all[1][k], "Recv", fmt.Sprint(on), fmt.Sprint(on*b))
	}
}

// TestRemove: after remove nothing is counted or printed, and a nil
// writer prints nothing.
func TestRemove(t *testing.T) {
	var out testrole.Output
	remove := install(t, &out)
	if err := remove(); err != nil {
		t.Fatal(err)
	}
	if err := remove(); err != nil { // a second time does nothing
		t.Fatal(err)
	}
	quiet := install(t, nil)
	defer quiet()
	err := mpi.Main(2, func(c *mpi.Comm) error {
		if c.Rank() == 0 {
			return c.Send([]byte{1}, 1, 0)
		}
		_, err := c.Recv(make([]byte, 1), 0, 0)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if out.String() != "" {
		t.Errorf("printed after remove:\n%s", out.String())
	}
}

// install is profile.Install that fails t on an error.
func install(t *testing.T, w io.Writer) (remove func() error) {
	t.Helper()
	remove, err := profile.Install(w)
	if err != nil {
		t.Fatal(err)
	}
	return remove
}
