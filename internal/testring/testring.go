// Package testring is the check the launcher tests run in every rank of
// a job (under Hydra, Slurm, tachyonrun): each rank sends a message to
// the next rank of a ring and checks the one from the previous rank.
// It takes the communicator's calls as functions, so that package mpi's
// own tests, which cannot import a package that imports mpi, use it too.
package testring

import "fmt"

// Tag is the tag of the ring's messages.
const Tag = 5

// Pass sends "from ME" to rank me+1 of n and checks that "from me-1"
// arrives from rank me-1 (both modulo n), through sendrecv, the
// communicator's Sendrecv with Tag both ways returning the bytes
// received; then it waits in barrier for every rank.
func Pass(me, n int, sendrecv func(send []byte, dest int, recv []byte, source int) (int, error), barrier func() error) error {
	buf := make([]byte, 64)
	prev := (me - 1 + n) % n
	k, err := sendrecv([]byte(fmt.Sprintf("from %d", me)), (me+1)%n, buf, prev)
	if err != nil {
		return err
	}
	if got, want := string(buf[:k]), fmt.Sprintf("from %d", prev); got != want {
		return fmt.Errorf("rank %d got %q, want %q", me, got, want)
	}
	return barrier()
}
