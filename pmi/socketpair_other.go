//go:build !unix

package pmi

import "errors"

// socketpairFDs fails: a process manager's connections need Unix.
func socketpairFDs() ([2]int, error) {
	return [2]int{}, errors.New("pmi: a process manager's connections need a Unix system")
}
