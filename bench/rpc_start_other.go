//go:build !linux

package main

import (
	"errors"
	"os/exec"
)

// pinnedStarter would start processes bound to CPUs: that needs Linux
// (and twoCPUs already says so before -rpc starts any).
type pinnedStarter struct{}

func newPinnedStarter() *pinnedStarter { return &pinnedStarter{} }

func (*pinnedStarter) start(*exec.Cmd, []int) error {
	return errors.New("-rpc binds its processes to CPUs: that needs Linux")
}

func (*pinnedStarter) close() {}
