//go:build !linux

package nethost

import (
	"errors"
	"os/exec"
)

// impl is empty where there are no network namespaces.
type impl struct{}

var errNotLinux = errors.New("nethost: network namespaces need Linux")

// Available reports that network namespaces need Linux.
func Available() error { return errNotLinux }

// New fails: network namespaces need Linux.
func New(cfg Config) (*Network, error) { return nil, errNotLinux }

// Close does nothing.
func (nw *Network) Close() error { return nil }

// Do fails: network namespaces need Linux.
func (h *Host) Do(fn func() error) error { return errNotLinux }

// Go fails: network namespaces need Linux.
func (h *Host) Go(fn func() error) (wait func() error) {
	return func() error { return errNotLinux }
}

// Start fails: network namespaces need Linux.
func (h *Host) Start(cmd *exec.Cmd) error { return errNotLinux }

// XDPAttached fails: not Linux.
func (h *Host) XDPAttached() (bool, error) { return false, errNotLinux }

// EnterEnv returns "": not Linux.
func (h *Host) EnterEnv() string { return "" }

// Command fails: not Linux.
func (h *Host) Command(name string, args ...string) (*exec.Cmd, error) { return nil, errNotLinux }

// EnterMain returns at once: not Linux.
func EnterMain() {}

// EnterEnvEach returns "": not Linux.
func EnterEnvEach(hosts []*Host) string { return "" }
