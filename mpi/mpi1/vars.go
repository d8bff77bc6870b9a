package mpi1

import "github.com/tachyon-hpc/tachyon/cvar"

var (
	maxContexts = cvar.NewInt("mpi1_max_contexts", 1024,
		"Most communication contexts package mpi1 lets one group context have, the default one included (NEWC beyond it fails with error status 11), and most it lets be pushed at once (PUSHC beyond it fails so too). Each context pushed once holds two communicators.",
		cvar.WithCategory("mpi1"), cvar.WithRange(1, 1<<20))
	maxGroupDepth = cvar.NewInt("mpi1_max_group_depth", 64,
		"Most group contexts package mpi1 lets a process push at once (PUSHG beyond it fails with error status 12). Each holds two communicators.",
		cvar.WithCategory("mpi1"), cvar.WithRange(1, 1<<16))
)
