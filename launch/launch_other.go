//go:build !linux

package launch

import (
	"errors"
	"fmt"
	"syscall"
)

var errNoBinding = errors.New("launch: binding ranks to CPUs needs Linux")

// sysProcAttr puts each rank in its own process group, so that a signal
// to the launcher's terminal group reaches the launcher alone and it
// stops the ranks itself.
func sysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// AllowedCPUs returns the CPUs the calling thread may run on; only Linux
// reports them.
func AllowedCPUs() ([]int, error) { return nil, errNoBinding }

func checkCPUs([]int) error { return fmt.Errorf("%w: %w", ErrConfig, errNoBinding) }

func bindThread(int) (func() error, error) { return nil, errNoBinding }
