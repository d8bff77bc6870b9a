//go:build !linux

package launch

import (
	"context"
	"errors"
	"fmt"
	"syscall"
)

var errNoBinding = errors.New("launch: binding ranks to CPUs needs Linux")

// sysProcAttr puts each rank in its own process group (groupAttr). Only
// Linux also kills a rank when the launcher dies (parent-death signal).
func sysProcAttr() *syscall.SysProcAttr { return groupAttr() }

// AllowedCPUs returns the CPUs the calling thread may run on; only Linux
// reports them.
func AllowedCPUs() ([]int, error) { return nil, errNoBinding }

func checkCPUs([]int) error { return fmt.Errorf("%w: %w", ErrConfig, errNoBinding) }

func bindThread(int) (func() error, error) { return nil, errNoBinding }

// runNetNS fails: hosts of network namespaces need Linux.
func runNetNS(context.Context, Config, string) (int, error) {
	return 1, errors.New("launch: a host for each rank needs Linux's network namespaces")
}
