package main

import (
	"errors"
	"fmt"
	"os/exec"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"
)

// pinnedStarter starts processes from one OS thread, bound to a process's
// CPUs while it forks it, so that a process and every thread it makes have
// those CPUs from their first instruction (and a Go child sizes GOMAXPROCS
// by it), as the job benchmark's launcher does. The thread lives until
// close: a child's parent-death signal, which the starter sets, is tied
// to the thread that forked it.
type pinnedStarter struct {
	reqs chan startReq
	done chan struct{}
}

type startReq struct {
	cmd    *exec.Cmd
	cpus   []int
	result chan error
}

func newPinnedStarter() *pinnedStarter {
	s := &pinnedStarter{reqs: make(chan startReq), done: make(chan struct{})}
	go s.loop()
	return s
}

func (s *pinnedStarter) loop() {
	defer close(s.done)
	runtime.LockOSThread()
	var orig unix.CPUSet
	if err := unix.SchedGetaffinity(0, &orig); err != nil {
		for r := range s.reqs {
			r.result <- fmt.Errorf("reading the CPUs this thread may use: %w", err)
		}
		return // the thread ends with the goroutine
	}
	tainted := false
	for r := range s.reqs {
		if tainted {
			r.result <- errors.New("the starter thread's CPUs could not be restored after an earlier start")
			continue
		}
		var set unix.CPUSet
		for _, c := range r.cpus {
			set.Set(c)
		}
		if err := unix.SchedSetaffinity(0, &set); err != nil {
			r.result <- fmt.Errorf("binding to CPUs %v: %w", r.cpus, err)
			continue
		}
		if r.cmd.SysProcAttr == nil {
			r.cmd.SysProcAttr = &syscall.SysProcAttr{}
		}
		r.cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
		err := r.cmd.Start()
		if unix.SchedSetaffinity(0, &orig) != nil {
			tainted = true
		}
		r.result <- err
	}
	if !tainted {
		runtime.UnlockOSThread()
	} // else the thread ends with the goroutine, its odd CPUs with it
}

// start starts cmd bound to cpus.
func (s *pinnedStarter) start(cmd *exec.Cmd, cpus []int) error {
	r := startReq{cmd, cpus, make(chan error)}
	s.reqs <- r
	return <-r.result
}

// close ends the starter once every process it started has ended.
func (s *pinnedStarter) close() {
	close(s.reqs)
	<-s.done
}
