//go:build !linux

package main

// pinThread does nothing: binding threads to CPUs needs Linux (and
// twoCPUs already reports that before the ranks start).
func pinThread(int) {}
