//go:build linux && race

package hwtests

const raceEnabled = true
