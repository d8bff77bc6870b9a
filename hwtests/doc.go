// Package hwtests holds tests that need root, daemons or network
// namespaces, and so cannot run on every developer's machine: each skips
// with a one-line reason where what it needs is missing. CI runs as root
// and installs what they use.
//
// slurm_test.go starts a private single-node Slurm cluster (munged,
// slurmctld and slurmd on ports of its own, everything under a temporary
// directory) and runs Tachyon jobs under srun --mpi=pmi2. shm_test.go
// mounts a small tmpfs to see a job that does not fit fail clearly.
//
// Like the shared-memory engine they test, the tests are Linux only: their
// files build only there, so elsewhere the package has no tests.
//
// The README's Layout and .ci/run say what each run of them needs.
package hwtests
