package mpi1

import (
	"fmt"
	"runtime"
	"time"

	"github.com/tachyon-hpc/tachyon/mpi"
)

// start is when the package was initialised: the "process was created"
// of WALL, which Go cannot read portably, to within the program's start.
var start = time.Now()

// MACHINE returns a description of the machine the calling process runs
// on, at most 80 characters: its name (mpi.ProcessorName), operating
// system, architecture and CPUs (MPI_MACHINE).
func (p *Proc) MACHINE() string {
	s := fmt.Sprintf("%s %s/%s %d CPUs", mpi.ProcessorName(), runtime.GOOS, runtime.GOARCH, runtime.NumCPU())
	if len(s) > 80 {
		s = s[:80]
	}
	return s
}

// INFOMN puts integers that describe the machine in ilist, at most
// maxlis of them, and returns how many it set (MPI_INFOMN). The seed
// fixes the first two: ilist[0], the processors the application uses,
// is its number of processes (the seed's processes each have a
// processor; those of ALL at the root); ilist[1], the processors of the
// machine, runtime.NumCPU. The seed left the rest under review: there
// are no others. A maxlis beyond ilist is error status 6.
func (p *Proc) INFOMN(maxlis int, ilist []int) int {
	if maxlis < 0 || maxlis > len(ilist) {
		return p.fail(ErrBufSize)
	}
	info := [...]int{p.gstack[0].all.comm.Size(), runtime.NumCPU()}
	return p.ok(copy(ilist[:maxlis], info[:]))
}

// DATE returns today's date, local time, as "MM/DD/YY" (MPI_DATE); YY of
// 90 or more is 19YY, less 20YY, as the seed reads it.
func DATE() string { return time.Now().Format("01/02/06") }

// TIME returns the local time of day to the second as "HH:MM:SS" on a
// 24-hour clock (MPI_TIME).
func TIME() string { return time.Now().Format("15:04:05") }

// WALL returns the wall-clock seconds since the process started (since
// this package was initialised, which is at the program's start)
// (MPI_WALL).
func WALL() float64 { return time.Since(start).Seconds() }

// CPU returns the user CPU time in seconds the calling process has used
// since it was created (MPI_CPU). The ranks of an mpi.Run share one
// process, and so its CPU time.
func CPU() float64 { return userCPU() }
