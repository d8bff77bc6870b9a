package pmi

import "github.com/tachyon-hpc/tachyon/pvar"

// The client's performance variables: what the process asked of its
// launcher's key-value space, the cost of a job's bootstrap.
var (
	pvGets = pvar.NewCounter("pmi_gets",
		"Values this process read from its PMI launcher's key-value space (cmd=get). Joining a job of N ranks makes O(N) in all (Allgather): about 2N on rank 0, a few on every other rank.",
		pvar.WithUnit("commands"))
	pvPuts = pvar.NewCounter("pmi_puts",
		"Values this process stored in its PMI launcher's key-value space (cmd=put).",
		pvar.WithUnit("commands"))
	pvBarriers = pvar.NewCounter("pmi_barriers",
		"Barriers this process entered with its PMI launcher (cmd=barrier_in), each a wait for every rank of the job.",
		pvar.WithUnit("commands"))
)
