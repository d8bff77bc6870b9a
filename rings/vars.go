package rings

import (
	"time"

	"github.com/tachyon-hpc/tachyon/cvar"
	"github.com/tachyon-hpc/tachyon/pvar"
)

// Control variables.
var (
	shmDir = cvar.NewString("rings_shm_dir", "/dev/shm",
		"Directory that holds named shared-memory segments; it must be a tmpfs that every process of a job sees alike.",
		cvar.WithCategory("rings"), cvar.WithScope(cvar.ScopeReadonly))
	checkSpins = cvar.NewInt("rings_check_spins", 1<<14,
		"Empty polls a blocking ring operation (Send, Recv, Write, Read) makes between two checks that its peer is alive and has not closed; a dead peer is reported at most this many polls after it is noticed.",
		cvar.WithCategory("rings"), cvar.WithRange(1, 1<<30), cvar.WithUnit("polls"))
	peerCheck = cvar.NewBool("rings_peer_check", true,
		"Check peer processes' liveness by pid (kill(pid, 0) and /proc/<pid>/stat start time). Turn off only where the peers live in different PID namespaces, where a pid means nothing to the other side.",
		cvar.WithCategory("rings"))
	unblockChecks = cvar.NewInt("rings_unblock_checks", 8,
		"Liveness-check intervals a many-to-one ring's reader waits at a claimed but never-written record, once a producer is known dead, before it skips the gap as that producer's abandoned claim.",
		cvar.WithCategory("rings"), cvar.WithRange(1, 1<<20), cvar.WithUnit("intervals"))
	unblockWait = cvar.NewDuration("rings_unblock_wait", 200*time.Millisecond,
		"Least time a many-to-one ring's reader waits at a reserved but unmarked record, once a producer is known dead, before skipping the gap as that producer's abandoned claim (besides rings_unblock_checks intervals). A live producer descheduled between reserving and marking leaves the same gap: the wait must outlast any time slice the host takes from it.",
		cvar.WithCategory("rings"), cvar.WithRange(0, int64(time.Hour)))
	prefetchCells = cvar.NewInt("rings_prefetch_cells", 8,
		"How many cells ahead of its tail a cell-ring producer asks the CPU to fetch for writing. Those cells were last read by the consumer's core; fetching them early lets the producer's stores complete without waiting for a cross-core transfer. 0 turns it off. Read when a producer attaches.",
		cvar.WithCategory("rings"), cvar.WithRange(0, 1024), cvar.WithUnit("cells"))
	prefetchRecord = cvar.NewInt("rings_prefetch_record_bytes", 64,
		"How far ahead of its tail a single-producer record writer asks the CPU to fetch a line for writing, each time its tail enters a new cache line. The line was last read (and zeroed) on the reader's core; fetching it while the current line fills lets the stores into it complete without waiting for a cross-core transfer. 0 turns it off. Read when a writer attaches.",
		cvar.WithCategory("rings"), cvar.WithRange(0, 4096), cvar.WithUnit("bytes"))
	prefetchWhole = cvar.NewInt("rings_prefetch_whole_record_bytes", 2048,
		"Smallest record whose every line a single-producer record writer asks the CPU to fetch for writing when it claims the record outside a stream (SetPrefetch(false): a record the reader waits for alone), so that the copy into it waits for one round of cross-core transfers rather than one after another as the store buffer fills; records in a stream go with the line-ahead prefetch. 0 turns it off. Read when a writer attaches.",
		cvar.WithCategory("rings"), cvar.WithRange(0, 1<<30), cvar.WithUnit("bytes"))
	maxSegment = cvar.NewInt("rings_max_segment_size", 1<<34,
		"Largest shared-memory segment CreateSegment makes or OpenSegment accepts.",
		cvar.WithCategory("rings"), cvar.WithRange(SegmentHeaderSize+CacheLine, 1<<46), cvar.WithUnit("bytes"))
)

// Performance variables.
var (
	pvCreated = pvar.NewCounter("rings_segments_created",
		"Shared-memory segments created by this process.", pvar.WithUnit("segments"))
	pvOpened = pvar.NewCounter("rings_segments_opened",
		"Shared-memory segments created elsewhere and opened by this process.", pvar.WithUnit("segments"))
	pvRemoved = pvar.NewCounter("rings_segments_removed",
		"Named segments removed by Segment.Remove.", pvar.WithUnit("segments"))
	pvStale = pvar.NewCounter("rings_stale_segments_removed",
		"Segments left by dead owners (no live process holds them) removed by RemoveStale or CreateSegment.", pvar.WithUnit("segments"))
	pvRejected = pvar.NewCounter("rings_corrupt_segments_rejected",
		"Segments and rings whose headers failed validation on open or attach.", pvar.WithUnit("segments"))
	pvMalformed = pvar.NewCounter("rings_malformed_dropped",
		"Cells and records with malformed lengths from a peer, dropped by the receiver.", pvar.WithUnit("messages"))
	pvAbandoned = pvar.NewCounter("rings_abandoned_records",
		"Records claimed in a many-to-one ring by a producer that died before committing them, skipped by the reader.", pvar.WithUnit("records"))
	pvDead = pvar.NewCounter("rings_dead_peers",
		"Peer processes found dead by a ring's liveness check.", pvar.WithUnit("processes"))
)
