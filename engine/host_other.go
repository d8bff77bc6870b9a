//go:build !linux

package engine

import (
	"fmt"
	"os"
	"runtime"
)

// HostID names the host this process runs on (its hostname here); with
// engine_net_force every process is a host of its own.
func HostID() string {
	id, _ := os.Hostname()
	if netForce.Get() {
		id += fmt.Sprintf("/pid:%d", os.Getpid())
	}
	return id
}

// HostCPUs returns the CPUs of the host, as far as Go knows them.
func HostCPUs() int { return runtime.NumCPU() }
