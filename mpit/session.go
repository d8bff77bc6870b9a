package mpit

import (
	"slices"
	"sync"
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
	freed bool
	// A per-session variable's reading (see PvarDesc): acc, plus, while
	// started, the change of the process-wide value since mark.
	started   bool
	acc, mark int64
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
		h.freed = true
	}
	s.handles, s.freed = nil, true
	return nil
}

// HandleAlloc allocates a handle on the performance variable of index i in
// the session (MPI_T_PVAR_HANDLE_ALLOC) and returns it with the number of
// values a read returns, 1 for every variable of the registry. A
// continuous variable's handle is active at once; any other starts
// stopped, reading zero until started. obj is the object the variable is
// bound to, ignored for a variable whose Bind is BindNoObject, which every
// variable's is. It returns ErrInvalidIndex for an index outside
// [0, PvarNum()).
func (s *Session) HandleAlloc(i int, obj Object) (*PvarHandle, int, error) {
	e, err := pvarAt("Session.HandleAlloc", i)
	if err != nil {
		return nil, 0, err
	}
	if err := s.lock("Session.HandleAlloc"); err != nil {
		return nil, 0, err
	}
	defer s.mu.Unlock()
	h := &PvarHandle{s: s, e: e}
	s.handles = append(s.handles, h)
	return h, 1, nil
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
	h.freed = true
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
				x.mark, x.started = x.e.v.Read(), true
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
				x.acc, x.started = x.value(x.e.v.Read()), false
			}
			return nil
		})
}

// value returns the handle's reading, given the variable's process-wide
// value now.
func (h *PvarHandle) value(now int64) int64 {
	if h.e.desc.Continuous {
		return now
	}
	if h.started {
		return h.acc + (now - h.mark)
	}
	return h.acc
}

// Read returns the handle's reading (MPI_T_PVAR_READ): for a counter,
// aggregate or timer the change of the process-wide value while the handle
// was started since its allocation or last reset (plus what Write set); for
// a continuous variable its current value.
func (s *Session) Read(h *PvarHandle) (int64, error) {
	if err := s.lock("Session.Read"); err != nil {
		return 0, err
	}
	defer s.mu.Unlock()
	if err := s.handle("Session.Read", h, false); err != nil {
		return 0, err
	}
	return h.value(h.e.v.Read()), nil
}

// Write sets the handle's reading to x (MPI_T_PVAR_WRITE); a started
// handle goes on counting from x. It returns ErrPvarNoWrite for a
// read-only variable's handle.
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
	h.acc, h.mark = x, h.e.v.Read()
	return nil
}

// Reset sets a handle's reading, or, for AllHandles, that of every handle
// of the session that is not read-only, to its starting value, zero
// (MPI_T_PVAR_RESET). It returns ErrPvarNoWrite for a read-only
// variable's handle.
func (s *Session) Reset(h *PvarHandle) error {
	return s.each("Session.Reset", h, func(x *PvarHandle) bool { return x.e.desc.ReadOnly },
		func(x *PvarHandle) error {
			if x.e.desc.ReadOnly {
				return errorf(ErrPvarNoWrite, x.e.desc.Name+" is read-only")
			}
			x.acc, x.mark = 0, x.e.v.Read()
			return nil
		})
}

// ReadReset returns the handle's reading and resets it, atomically
// (MPI_T_PVAR_READRESET): every change of the process-wide value is in
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
	now := h.e.v.Read()
	x := h.value(now)
	h.acc, h.mark = 0, now
	return x, nil
}
