package mpi1

import (
	"fmt"
	"regexp"
	"runtime"
	"testing"
	"time"
)

// TestETEXT: every error status of the table, the seed's 1 to 12 and this
// package's 13 to 16, has its own text of at most 80 characters, and
// other codes one that says so.
func TestETEXT(t *testing.T) {
	seed := map[int]string{
		0: "No error", 1: "Invalid PID used", 2: "Invalid GID used", 3: "Invalid MSGID used",
		4: "Invalid CCID used", 5: "Invalid GCPID used", 6: "Invalid message buffer size",
		7: "Invalid stride in MPI_SPACK/MPI_SUNPACK", 8: "Invalid block size in pack/unpack routine",
		9: "Invalid data item size in pack/unpack routine", 10: "System buffer overflow",
		11: "Too many communication contexts", 12: "Too many group contexts",
	}
	seen := map[string]int{}
	for code := NoError; code <= ErrCommFailed; code++ {
		s := ETEXT(code)
		if want, ok := seed[code]; ok && s != want {
			t.Errorf("ETEXT(%d) = %q, want the seed's %q", code, s, want)
		}
		if s == "" || len(s) > 80 {
			t.Errorf("ETEXT(%d) = %q", code, s)
		}
		if c, dup := seen[s]; dup {
			t.Errorf("ETEXT(%d) = ETEXT(%d) = %q", code, c, s)
		}
		seen[s] = code
	}
	for _, code := range []int{-1, ErrCommFailed + 1, 1 << 40} {
		if s := ETEXT(code); s != "Unknown error status" {
			t.Errorf("ETEXT(%d) = %q", code, s)
		}
	}
}

// TestClocks: DATE is "MM/DD/YY" and TIME "HH:MM:SS" of now; WALL and CPU
// count up.
func TestClocks(t *testing.T) {
	before := time.Now()
	d, tm := DATE(), TIME()
	after := time.Now()
	if !regexp.MustCompile(`^\d\d/\d\d/\d\d$`).MatchString(d) ||
		(d != before.Format("01/02/06") && d != after.Format("01/02/06")) {
		t.Errorf("DATE() = %q at %v", d, before)
	}
	if !regexp.MustCompile(`^([01]\d|2[0-3]):[0-5]\d:[0-5]\d$`).MatchString(tm) ||
		(tm != before.Format("15:04:05") && tm != after.Format("15:04:05")) {
		t.Errorf("TIME() = %q at %v", tm, before)
	}
	w0, c0 := WALL(), CPU()
	if w0 < 0 || c0 < 0 {
		t.Fatalf("WALL() = %v, CPU() = %v", w0, c0)
	}
	x := 0
	for deadline := time.Now().Add(30 * time.Millisecond); time.Now().Before(deadline); {
		x++ // spend CPU time
	}
	w1, c1 := WALL(), CPU()
	if w1-w0 < 0.03 || c1 <= c0 {
		t.Errorf("after 30ms of work (%d turns): WALL %v -> %v, CPU %v -> %v", x, w0, w1, c0, c1)
	}
}

// TestMachine: MACHINE names this machine in at most 80 characters;
// INFOMN gives the application's processors and the machine's.
func TestMachine(t *testing.T) { both(t, 2, scMachine) }

var scMachine = scenario("machine", func(p *Proc) error {
	if m := p.MACHINE(); m == "" || len(m) > 80 {
		return fmt.Errorf("MACHINE() = %q", m)
	}
	info := make([]int, 4)
	if err := first(
		expect(p, "INFOMN", p.INFOMN(4, info), 2, 0),
		expect(p, "INFOMN of 1", p.INFOMN(1, info), 1, 0),
		fails(p, "INFOMN beyond ilist", p.INFOMN(5, info), ErrBufSize),
		fails(p, "INFOMN -1", p.INFOMN(-1, info), ErrBufSize),
	); err != nil {
		return err
	}
	if info[0] != 2 || info[1] != runtime.NumCPU() {
		return fmt.Errorf("INFOMN gave %v, want [2 %d]", info[:2], runtime.NumCPU())
	}
	// Under a pushed group the application is still two processes.
	half := p.PARTG(p.ALL(), p.GETID(p.ALL()))
	return first(
		expect(p, "PUSHG", p.PUSHG(half), 1, 0),
		expect(p, "INFOMN inside", p.INFOMN(1, info), 1, 0),
		expectInt("INFOMN inside", info[0], 2),
		expect(p, "POPG", p.POPG(), p.ALL(), 0),
	)
})

func expectInt(what string, got, want int) error {
	if got != want {
		return fmt.Errorf("%s: %d, want %d", what, got, want)
	}
	return nil
}
