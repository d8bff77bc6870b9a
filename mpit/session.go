package mpit

import (
	"runtime"
	"slices"
	"strconv"
	"sync"

	"github.com/tachyon-hpc/tachyon/pvar"
)

// Session is a performance experiment session (MPI_T_pvar_session): a
// tool's own set of handles on performance variables. What one session
// does (start, stop, write, reset) changes only what its own handles read:
// a session's counters count from its own starts and resets, and no
// session can change a process-wide value. A Session is valid from
// NewSession to Free or to the Finalize that ends the interface's current
// initialization; every method is safe for concurrent use, and each runs
// atomically with respect to the session's other methods.
type Session struct {
	mu      sync.Mutex
	gen     uint64
	freed   bool
	handles []*PvarHandle // allocated and not freed, oldest first
}

// PvarHandle is a handle on a performance variable in one session
// (MPI_T_pvar_handle). Its state is its session's: it is used only through
// the Session it was allocated in.
type PvarHandle struct {
	s     *Session
	e     *pvarEntry
	key   pvar.Key // the bound object's; the zero Key for BindNoObject
	freed bool
	// A per-session variable's reading (see PvarDesc): for a counter,
	// aggregate or timer, acc plus, while started, the change of the
	// value since mark; for a watermark, the larger of acc and, while
	// started, win's mark.
	started   bool
	acc, mark int64
	win       *pvar.Window // a watermark's, open from allocation to free
}

// AllHandles stands for every handle of a session (MPI_T_PVAR_ALL_HANDLES)
// in Start, Stop and Reset; Read, Write, ReadReset and FreeHandle return
// ErrInvalidHandle for it.
var AllHandles = &PvarHandle{}

// NewSession creates a session (MPI_T_PVAR_SESSION_CREATE).
func NewSession() (*Session, error) {
	g, err := current("NewSession")
	if err != nil {
		return nil, err
	}
	return &Session{gen: g}, nil
}

// lock locks s for op if s is usable: ErrInvalidSession for a nil, freed
// or earlier generation's session.
func (s *Session) lock(op string) error {
	if s == nil {
		return errorf(ErrInvalidSession, op+" of a nil session (MPI_T_PVAR_SESSION_NULL)")
	}
	if err := checkGen(op, s.gen, ErrInvalidSession); err != nil {
		return err
	}
	s.mu.Lock()
	if s.freed {
		s.mu.Unlock()
		return errorf(ErrInvalidSession, op+" of a freed session")
	}
	return nil
}

// Free frees the session and every handle allocated in it
// (MPI_T_PVAR_SESSION_FREE).
func (s *Session) Free() error {
	if err := s.lock("Session.Free"); err != nil {
		return err
	}
	defer s.mu.Unlock()
	for _, h := range s.handles {
		h.release()
	}
	s.handles, s.freed = nil, true
	return nil
}

// HandleAlloc allocates a handle on the performance variable of index i in
// the session (MPI_T_PVAR_HANDLE_ALLOC) and returns it with the number of
// values a read returns, 1 for every variable of the registry, bound or
// not. A continuous variable's handle is active at once; any other starts
// stopped, reading zero until started.
//
// obj is the object the variable is bound to. For a variable whose Bind
// is BindNoObject it is ignored and the handle reads the process-wide
// value. For a BindComm variable it must be a communicator (*mpi.Comm) of
// a rank that has not finalized, and the handle reads that rank's value
// (in a world of goroutine ranks, the rank's own, not the process's sum),
// or for a queue length that communicator's. It returns ErrInvalidIndex
// for an index outside [0, PvarNum()), ErrInvalid for a bound variable's
// nil, wrongly typed or unusable object, and ErrOutOfHandles for a
// watermark that has pvar.Windows handles in all sessions already.
func (s *Session) HandleAlloc(i int, obj Object) (*PvarHandle, int, error) {
	const op = "Session.HandleAlloc"
	e, err := pvarAt(op, i)
	if err != nil {
		return nil, 0, err
	}
	k, err := bindKey(op, e.desc.Name, e.desc.Bind, obj)
	if err != nil {
		return nil, 0, err
	}
	if err := s.lock(op); err != nil {
		return nil, 0, err
	}
	defer s.mu.Unlock()
	h := &PvarHandle{s: s, e: e, key: k}
	if hw := e.v.Watermark(); hw != nil {
		w, ok := hw.OpenWindow(k)
		if !ok {
			return nil, 0, errorf(ErrOutOfHandles, op+": "+e.desc.Name+" has its "+
				strconv.Itoa(pvar.Windows)+" handles already, in this session and others")
		}
		h.win = w
		trackWindow(w)
		// A handle dropped without FreeHandle gives its window back once
		// it is collected.
		runtime.AddCleanup(h, func(w *pvar.Window) { untrackWindow(w); w.Close() }, w)
	}
	s.handles = append(s.handles, h)
	return h, 1, nil
}

// release frees h's resources; s is locked.
func (h *PvarHandle) release() {
	h.freed = true
	if h.win != nil {
		untrackWindow(h.win)
		h.win.Close()
	}
}

// handle checks, for op with s locked, that h is one of the session's
// live handles; all says whether op accepts AllHandles.
func (s *Session) handle(op string, h *PvarHandle, all bool) error {
	switch {
	case h == nil:
		return errorf(ErrInvalidHandle, op+" of a nil handle (MPI_T_PVAR_HANDLE_NULL)")
	case h == AllHandles:
		if all {
			return nil
		}
		return errorf(ErrInvalidHandle, op+" does not take AllHandles")
	case h.s != s:
		return errorf(ErrInvalidHandle, op+": the handle on "+h.e.desc.Name+" belongs to another session")
	case h.freed:
		return errorf(ErrInvalidHandle, op+" of a freed handle on "+h.e.desc.Name)
	}
	return nil
}

// FreeHandle frees a handle of the session (MPI_T_PVAR_HANDLE_FREE).
func (s *Session) FreeHandle(h *PvarHandle) error {
	if err := s.lock("Session.FreeHandle"); err != nil {
		return err
	}
	defer s.mu.Unlock()
	if err := s.handle("Session.FreeHandle", h, false); err != nil {
		return err
	}
	h.release()
	s.handles = slices.DeleteFunc(s.handles, func(x *PvarHandle) bool { return x == h })
	return nil
}

// each applies f, with s locked, to h, or to every handle of the session
// for AllHandles, skipping those skip reports.
func (s *Session) each(op string, h *PvarHandle, skip func(*PvarHandle) bool, f func(*PvarHandle) error) error {
	if err := s.lock(op); err != nil {
		return err
	}
	defer s.mu.Unlock()
	if err := s.handle(op, h, true); err != nil {
		return err
	}
	if h != AllHandles {
		return f(h)
	}
	for _, x := range s.handles {
		if !skip(x) {
			if err := f(x); err != nil {
				return err
			}
		}
	}
	return nil
}

// Start starts a handle, or, for AllHandles, every handle of the session
// that is neither continuous nor started (MPI_T_PVAR_START). Starting a
// started handle does nothing. It returns ErrPvarNoStartStop for a
// continuous variable's handle.
func (s *Session) Start(h *PvarHandle) error {
	return s.each("Session.Start", h, func(x *PvarHandle) bool { return x.e.desc.Continuous || x.started },
		func(x *PvarHandle) error {
			if x.e.desc.Continuous {
				return errorf(ErrPvarNoStartStop, x.e.desc.Name+" is continuous")
			}
			if !x.started {
				if x.win != nil {
					x.win.Reset() // marks from now, from the level now
				}
				x.mark, x.started = x.read(), true
			}
			return nil
		})
}

// Stop stops a handle, or, for AllHandles, every handle of the session
// that is neither continuous nor stopped (MPI_T_PVAR_STOP): it keeps
// reading what it read when stopped. Stopping a stopped handle does
// nothing. It returns ErrPvarNoStartStop for a continuous variable's
// handle.
func (s *Session) Stop(h *PvarHandle) error {
	return s.each("Session.Stop", h, func(x *PvarHandle) bool { return x.e.desc.Continuous || !x.started },
		func(x *PvarHandle) error {
			if x.e.desc.Continuous {
				return errorf(ErrPvarNoStartStop, x.e.desc.Name+" is continuous")
			}
			if x.started {
				x.acc, x.started = x.value(x.read()), false
			}
			return nil
		})
}

// read returns the variable's value now for the handle's object: for a
// watermark, its window's mark (pvar.HighWatermark.ToMark: a low
// watermark's marks grow as its values fall); else the bound object's
// value, or the process's for an unbound variable.
func (h *PvarHandle) read() int64 {
	if h.win != nil {
		return h.win.Mark()
	}
	return h.e.v.ReadAt(h.key)
}

// reading returns the handle's reading given read's value now: value, as
// a value rather than a watermark's mark.
func (h *PvarHandle) reading(now int64) int64 {
	if h.win != nil {
		return h.win.Watermark().FromMark(h.value(now))
	}
	return h.value(now)
}

// value returns the handle's reading, given the variable's value now
// (read), for a watermark as a mark.
func (h *PvarHandle) value(now int64) int64 {
	switch {
	case h.e.desc.Continuous:
		return now
	case !h.started:
		return h.acc
	case h.win != nil:
		return max(h.acc, now)
	}
	return h.acc + (now - h.mark)
}

// Read returns the handle's reading (MPI_T_PVAR_READ): for a counter,
// aggregate or timer the change of the value while the handle was started
// since its allocation or last reset (plus what Write set); for a high
// watermark the largest value observed while the handle was started since
// then, no less than the level at its last start or reset (nor than what
// Write set), and for a low watermark the smallest, no more than those
// (math.MaxInt64 before its first start); for a continuous variable its
// current value. The value is
// the bound object's (its rank's, or its communicator's), or the
// process's for a variable bound to no object.
func (s *Session) Read(h *PvarHandle) (int64, error) {
	if err := s.lock("Session.Read"); err != nil {
		return 0, err
	}
	defer s.mu.Unlock()
	if err := s.handle("Session.Read", h, false); err != nil {
		return 0, err
	}
	return h.reading(h.read()), nil
}

// Write sets the handle's reading to x (MPI_T_PVAR_WRITE); a started
// handle goes on counting from x, a watermark's marking from x. It
// returns ErrPvarNoWrite for a read-only variable's handle.
func (s *Session) Write(h *PvarHandle, x int64) error {
	if err := s.lock("Session.Write"); err != nil {
		return err
	}
	defer s.mu.Unlock()
	if err := s.handle("Session.Write", h, false); err != nil {
		return err
	}
	if h.e.desc.ReadOnly {
		return errorf(ErrPvarNoWrite, h.e.desc.Name+" is read-only")
	}
	if h.win != nil {
		h.win.Reset()
		x = h.win.Watermark().ToMark(x)
	}
	h.acc, h.mark = x, h.read()
	return nil
}

// Reset sets a handle's reading, or, for AllHandles, that of every handle
// of the session that is not read-only, to its starting value
// (MPI_T_PVAR_RESET): zero for a counter, aggregate or timer; for a
// watermark the level now, from which a started handle marks again. It
// returns ErrPvarNoWrite for a read-only variable's handle.
func (s *Session) Reset(h *PvarHandle) error {
	return s.each("Session.Reset", h, func(x *PvarHandle) bool { return x.e.desc.ReadOnly },
		func(x *PvarHandle) error {
			if x.e.desc.ReadOnly {
				return errorf(ErrPvarNoWrite, x.e.desc.Name+" is read-only")
			}
			x.acc = 0
			if x.win != nil {
				x.win.Reset()
				if !x.started {
					x.acc = x.read() // the level now, the watermark's starting value
				}
			}
			x.mark = x.read()
			return nil
		})
}

// ReadReset returns the handle's reading and resets it, atomically
// (MPI_T_PVAR_READRESET): every change of the value is in
// exactly one of the readings of a sequence of ReadResets, however many
// goroutines call them. It returns ErrPvarNoAtomic for a variable that is
// not Atomic.
func (s *Session) ReadReset(h *PvarHandle) (int64, error) {
	if err := s.lock("Session.ReadReset"); err != nil {
		return 0, err
	}
	defer s.mu.Unlock()
	if err := s.handle("Session.ReadReset", h, false); err != nil {
		return 0, err
	}
	if !h.e.desc.Atomic {
		return 0, errorf(ErrPvarNoAtomic, h.e.desc.Name+" cannot be read and reset atomically")
	}
	now := h.read()
	x := h.reading(now)
	h.acc, h.mark = 0, now
	return x, nil
}
