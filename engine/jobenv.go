package engine

// Environment variables through which a launcher (package launch,
// tachyonrun) tells a process its place in a shared-memory job, and the
// facade's Init reads it: named here once, for both (mpi.EnvRank and
// launch.EnvRank are these).
const (
	EnvRank    = "TACHYON_RANK"    // this process's world rank
	EnvSize    = "TACHYON_SIZE"    // the number of ranks
	EnvSegment = "TACHYON_SEGMENT" // the job's shared-memory segment name (OpenShm)
)
