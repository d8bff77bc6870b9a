package mpit

import "strconv"

// enumString is the String of v, of the integer type named typ whose values
// from 0 have names.
func enumString[T ~int](typ string, names []string, v T) string {
	if v < 0 || int(v) >= len(names) {
		return typ + "(" + strconv.Itoa(int(v)) + ")"
	}
	return names[v]
}
