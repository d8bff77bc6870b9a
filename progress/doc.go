// Package progress is Tachyon's progress engine and its clock: the one
// place where every layer's pending work is driven, and the time that
// Wtime, Wtick and timer requests read.
//
// The clock: Wtime returns seconds since a fixed point in this process's
// past, read from the CPU's time-stamp counter (CNTVCT_EL0 on arm64) and
// converted with a frequency calibrated once against CLOCK_MONOTONIC_RAW,
// or from the monotonic clock where the counter cannot be trusted
// (Clock says which, and why). Wtime is monotonic across goroutines that
// communicate; in a job across hosts it is steered toward rank 0's
// (SteerClock), never stepping back.
//
// The engine: transports Register a Poller each (a ring's inbox, a NIC
// queue); a goroutine that waits on a Completion calls the pollers and
// fires due timers itself, spinning, then yielding, then parking on a
// Doorbell that producers ring (the idle strategy, progress_idle), so
// that no dedicated thread is needed, though Start runs one. Timer
// requests (NewTimer, MPI_TIMER_CREATE) complete once the clock passes
// their due time, from a hierarchical timing wheel (package
// progress/wheel).
//
// The contract: pollers and timer callbacks run on one goroutine at a
// time; every Engine method is safe for concurrent use; Progress, Test,
// Wait and Complete allocate nothing, and Progress takes no mutex (a
// flag keeps two goroutines from polling at once, none under SetSerial);
// every blocking wait has a form that takes a context.Context.
//
// The data flow:
//
//	transport ──publish──► ring/NIC queue ──Doorbell.Ring──► parked waiter wakes
//	                                                              │
//	waiter: Wait(c) ──► Progress(): Poller.Poll() for each, wheel.Advance(Now())
//	                          │                                    │
//	                          └──► c.MarkDone() ◄──────────────────┘ (message or timer)
//
// docs/progress.md has the clock's calibration, the idle strategies, the
// parking protocol, the control variables and the measured costs.
package progress
