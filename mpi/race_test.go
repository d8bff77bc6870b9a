//go:build race

package mpi

// raceEnabled reports a -race build, whose sync.Pool drops items on
// purpose: allocation counts do not hold there.
const raceEnabled = true
