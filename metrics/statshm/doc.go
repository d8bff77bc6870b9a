// Package statshm publishes a process's performance variables (package
// pvar) in a file of shared memory, where tachyonstat (cmd/tachyonstat),
// or any reader of this package, reads them from outside the job while it
// runs: a third view of the pvar registry beside metrics/expvars and
// metrics/prom, for processes that serve nothing, as AeronStat reads
// Aeron's counters.
//
// A Publisher (Start) owns one file, metrics_stat_dir/tachyon-stat-PID-N
// (/dev/shm by default), readable and writable by its owner alone (0600),
// laid out as a header (who publishes: pid, rank, job, session, host), an
// append-only table of variable descriptors (name, class, unit) and one
// 8-byte value slot per variable. Every metrics_stat_interval a goroutine
// of the publisher reads every variable and stores the values into the
// slots; variables registered since the last time join the table. Stop
// removes the file. Each session of package mpi (NewSession, and Init's)
// starts a publisher unless metrics_stat is off (or WithStat says), whose
// file names the session and holds its own ranks' values (Config.Owners);
// Close, Finalize and Abort stop it. Main's in-process world publishes
// the process's values.
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
//
// docs/tachyonstat.md describes the file and its reader.
package statshm
