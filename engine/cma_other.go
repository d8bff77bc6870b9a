//go:build !linux

package engine

import "errors"

var (
	errCMAOff   = errors.New("cross-memory attach needs Linux")
	errCMASmall = errors.New("message below engine_cma_min: streamed instead")
)

func readProcess(pid int, addr uint64, dst []byte) error { return errCMAOff }

func writeProcess(pid int, addr uint64, src []byte) error { return errCMAOff }

func isPermission(err error) bool { return true }
