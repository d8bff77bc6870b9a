//go:build !race

package mpi1

const raceEnabled = false
