//go:build !race

package progress

// raceEnabled reports a -race build, whose allocation counts do not hold.
const raceEnabled = false
