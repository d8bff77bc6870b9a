package statshm

import (
	"time"

	"github.com/tachyon-hpc/tachyon/cvar"
)

// Control variables.
var (
	enabled = cvar.NewBool("metrics_stat", true,
		"Publish each MPI session's performance variables in a file under metrics_stat_dir while it is open (Init to Finalize, NewSession to Close), for tachyonstat to read from outside the job; a session's WithStat overrides it. Costs one wake of a goroutine every metrics_stat_interval, per session.",
		cvar.WithCategory("metrics"), cvar.WithScope(cvar.ScopeReadonly))
	interval = cvar.NewDuration("metrics_stat_interval", 100*time.Millisecond,
		"How often the publisher copies the performance variables into the tachyonstat file: the age of the values tachyonstat shows is at most this.",
		cvar.WithCategory("metrics"), cvar.WithScope(cvar.ScopeReadonly), cvar.WithRange(int64(time.Millisecond), int64(time.Hour)))
	dirVar = cvar.NewString("metrics_stat_dir", "/dev/shm",
		"Directory of the tachyonstat files (tachyon-stat-*), one per session, each readable by its owner only; a tmpfs, so that publishing never writes to a disk. tachyonstat reads the same variable (TACHYON_METRICS_STAT_DIR) for its default -dir.",
		cvar.WithCategory("metrics"), cvar.WithScope(cvar.ScopeReadonly))
)

// Enabled reports whether processes publish their variables
// (metrics_stat).
func Enabled() bool { return enabled.Get() }

// Dir returns the directory of the files (metrics_stat_dir).
func Dir() string { return dirVar.Get() }
