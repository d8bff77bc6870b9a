// Package statshm publishes a process's performance variables (package
// pvar) in a file of shared memory, where tachyonstat (cmd/tachyonstat),
// or any reader of this package, reads them from outside the job while it
// runs: a third view of the pvar registry beside metrics/expvars and
// metrics/prom, for processes that serve nothing, as AeronStat reads
// Aeron's counters.
//
// A Publisher (Start) owns one file, metrics_stat_dir/tachyon-stat-PID-N
// (/dev/shm by default), laid out as a header (who publishes: pid, rank,
// job, host), an append-only table of variable descriptors (name, class,
// unit) and one 8-byte value slot per variable. Every metrics_stat_interval
// a goroutine of the publisher reads every variable and stores the values
// into the slots; variables registered since the last time join the
// table. Stop removes the file. The facade's Init (and Main's in-process
// world) starts a publisher unless metrics_stat is off; Finalize and Abort
// stop it.
//
// A Reader (Open) maps the file read-only and reads it with atomic loads
// alone: every value is read whole, and a sequence number that is odd
// while the publisher writes (a seqlock) lets it return the values of one
// publication. It takes no lock and makes no call the job could wait on,
// so reading never stops, slows or asks the job. It checks every field
// before it trusts it: a short, foreign, corrupt or truncated file is an
// error (ErrNotStat, ErrVersion, ErrCorrupt), never a panic. A file whose
// publisher died without Stop (killed, or exited without Finalize) is
// reported Stale, and RemoveStale removes such files.
package statshm
