package rings

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

var tmpSeq atomic.Uint64

// CreateSegment creates a named segment of size bytes (header included,
// rounded up to a page; see SegmentSize) under rings_shm_dir. A segment of
// the same name left by processes that are all gone is removed first; one
// that a live process holds gives an error matching fs.ErrExist.
//
// The segment appears under its name only once its header is complete
// (it is built under a temporary name and linked into place), so an
// opener never sees a half-made one.
func CreateSegment(name string, size int) (*Segment, error) {
	sz, err := segmentBytes(name, size)
	if err != nil {
		return nil, err
	}
	dir := shmDir.Get()
	path := filepath.Join(dir, name)
	fd, tmp, err := createTemp(dir, name)
	if err != nil {
		return nil, err
	}
	s, err := newSegment(fd, sz, name)
	if err != nil {
		unix.Unlink(tmp)
		return nil, err
	}
	s.path = path
	for retried := false; ; retried = true {
		err = unix.Link(tmp, path)
		if err == nil {
			break
		}
		if err == unix.EEXIST && !retried {
			if removed, _ := removeIfStale(dir, name); removed {
				continue
			}
		}
		unix.Unlink(tmp)
		s.Close()
		if err == unix.EEXIST {
			return nil, fmt.Errorf("create segment %s: %w (held by a live process)", path, fs.ErrExist)
		}
		return nil, &fs.PathError{Op: "create segment", Path: path, Err: err}
	}
	unix.Unlink(tmp)
	pvCreated.Add(1)
	return s, nil
}

// createTemp creates the temporary file a named segment is built in, and
// returns it locked. RemoveStale, in this or another process, takes an
// unlocked file for a leftover and may remove it between the create and
// the lock; the lock is taken before the check that the file is still
// linked, so a file that passes it is never removed, and one that fails
// it is made again under a new name.
func createTemp(dir, name string) (fd int, tmp string, err error) {
	for range 100 {
		tmp = filepath.Join(dir, "."+name+".tmp."+strconv.Itoa(os.Getpid())+"."+strconv.FormatUint(tmpSeq.Add(1), 10))
		fd, err = unix.Open(tmp, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0o600)
		if err != nil {
			return -1, "", &fs.PathError{Op: "create segment", Path: tmp, Err: err}
		}
		var st unix.Stat_t
		if err = unix.Flock(fd, unix.LOCK_SH); err == nil {
			err = unix.Fstat(fd, &st)
		}
		if err != nil {
			unix.Close(fd)
			unix.Unlink(tmp)
			return -1, "", &fs.PathError{Op: "create segment", Path: tmp, Err: err}
		}
		if st.Nlink > 0 {
			return fd, tmp, nil
		}
		unix.Close(fd) // removed as stale before the lock: again
	}
	return -1, "", &fs.PathError{Op: "create segment", Path: tmp, Err: errors.New("removed as stale 100 times in a row")}
}

// CreateMemfdSegment creates an unnamed segment in a memfd, whose size is
// sealed. Other processes get it through File (os/exec's ExtraFiles) and
// OpenSegmentFile; it disappears with the last process that holds it, so
// it never goes stale.
func CreateMemfdSegment(name string, size int) (*Segment, error) {
	sz, err := segmentBytes(name, size)
	if err != nil {
		return nil, err
	}
	fd, err := unix.MemfdCreate("tachyon-"+name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, os.NewSyscallError("memfd_create", err)
	}
	s, err := newSegment(fd, sz, name)
	if err != nil {
		return nil, err
	}
	pvCreated.Add(1)
	return s, nil
}

// segmentBytes checks a new segment's name and size, and returns the size
// rounded up to a page.
func segmentBytes(name string, size int) (int, error) {
	if err := checkName(name); err != nil {
		return 0, err
	}
	page := os.Getpagesize()
	if size < SegmentHeaderSize+CacheLine || int64(size) > maxSegment.Get() {
		return 0, fmt.Errorf("%w: segment size %d outside [%d, rings_max_segment_size=%d]",
			ErrInvalid, size, SegmentHeaderSize+CacheLine, maxSegment.Get())
	}
	return (size + page - 1) / page * page, nil
}

// newSegment sizes, reserves, locks and maps a new segment file and writes
// its header; it closes fd on failure.
func newSegment(fd, size int, name string) (*Segment, error) {
	fail := func(op string, err error) (*Segment, error) {
		unix.Close(fd)
		return nil, os.NewSyscallError(op, err)
	}
	if err := unix.Flock(fd, unix.LOCK_SH); err != nil {
		return fail("flock", err)
	}
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		return fail("ftruncate", err)
	}
	// Reserve the pages now: a full tmpfs fails here rather than with
	// SIGBUS at the first touch of a page.
	if err := unix.Fallocate(fd, 0, 0, int64(size)); err != nil && err != unix.EOPNOTSUPP {
		return fail("fallocate", err)
	}
	// Only memfds take seals; a peer then cannot shrink the segment
	// under our mapping.
	unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_SEAL)
	mem, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return fail("mmap", err)
	}
	s := &Segment{name: name, fd: fd, mem: mem}
	s.identify()
	s.initHeader(selfID())
	return s, nil
}

// Prefault readies mem, part of a segment's mapping, for this process: it
// maps every page of it now, writable (MADV_POPULATE_WRITE, where the
// kernel has it), and reads every cache line of it. Otherwise the first lap
// of a ring through its pages pays a minor fault per page and a miss to
// memory per line in the middle of traffic, which makes a fresh job's
// first round trips slower than the rest (docs/engine.md, engine_prefault).
// It does not change mem, so other processes may be using it.
func Prefault(mem []byte) error {
	if len(mem) == 0 {
		return nil
	}
	// madvise wants a page-aligned start: widen the range down to the
	// page mem starts in, which the same mapping holds.
	page := uintptr(os.Getpagesize())
	back := uintptr(unsafe.Pointer(unsafe.SliceData(mem))) % page
	whole := unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(mem)), -int(back))), len(mem)+int(back))
	if err := unix.Madvise(whole, unix.MADV_POPULATE_WRITE); err != nil && err != unix.EINVAL {
		return os.NewSyscallError("madvise", err)
	}
	touch(mem)
	return nil
}

func (s *Segment) identify() {
	var st unix.Stat_t
	if unix.Fstat(s.fd, &st) == nil {
		s.dev, s.ino = st.Dev, st.Ino
	}
}

// OpenSegment opens the named segment another process created. A missing
// segment gives an error matching fs.ErrNotExist; a corrupt or mismatched
// one an error matching ErrBadSegment.
func OpenSegment(name string) (*Segment, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	path := filepath.Join(shmDir.Get(), name)
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open segment", Path: path, Err: err}
	}
	s, err := openFD(fd, name)
	if err != nil {
		return nil, fmt.Errorf("open segment %s: %w", path, err)
	}
	s.path = path
	return s, nil
}

// OpenSegmentFile opens the segment in f, a memfd (or segment file)
// inherited from its creator. The segment keeps its own descriptor: the
// caller may close f.
func OpenSegmentFile(f *os.File) (*Segment, error) {
	if f == nil {
		return nil, ErrInvalid
	}
	fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, os.NewSyscallError("dup", err)
	}
	s, err := openFD(fd, "")
	if err != nil {
		return nil, fmt.Errorf("open segment %s: %w", f.Name(), err)
	}
	return s, nil
}

// openFD locks, maps and validates a segment; it closes fd on failure.
func openFD(fd int, name string) (*Segment, error) {
	fail := func(err error) (*Segment, error) {
		unix.Close(fd)
		return nil, err
	}
	if err := unix.Flock(fd, unix.LOCK_SH); err != nil {
		return fail(os.NewSyscallError("flock", err))
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fail(os.NewSyscallError("fstat", err))
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return fail(fmt.Errorf("%w: not a regular file", ErrBadSegment))
	}
	if st.Nlink == 0 && name != "" {
		return fail(fmt.Errorf("removed as stale: %w", fs.ErrNotExist))
	}
	if st.Size < SegmentHeaderSize || st.Size > maxSegment.Get() {
		pvRejected.Add(1)
		return fail(fmt.Errorf("%w: size %d outside [%d, rings_max_segment_size]", ErrBadSegment, st.Size, SegmentHeaderSize))
	}
	mem, err := unix.Mmap(fd, 0, int(st.Size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return fail(os.NewSyscallError("mmap", err))
	}
	if err := parseSegmentHeader(mem, st.Size); err != nil {
		pvRejected.Add(1)
		unix.Munmap(mem)
		return fail(err)
	}
	s := &Segment{name: name, fd: fd, mem: mem, dev: st.Dev, ino: st.Ino}
	pvOpened.Add(1)
	return s, nil
}

// File returns a new descriptor of the segment, to hand to a child
// process (os/exec's ExtraFiles) that opens it with OpenSegmentFile. The
// caller closes it.
func (s *Segment) File() (*os.File, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	fd, err := unix.FcntlInt(uintptr(s.fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, os.NewSyscallError("dup", err)
	}
	return os.NewFile(uintptr(fd), "segment "+s.name), nil
}

// Close unmaps the segment and releases this process's hold on it. Rings
// taken from it must not be used afterwards. A named segment stays until
// Remove, or until RemoveStale finds nobody holding it.
func (s *Segment) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	s.closed = true
	err := unix.Munmap(s.mem)
	s.mem = nil
	if e := unix.Close(s.fd); err == nil {
		err = e
	}
	return err
}

// Remove unlinks a named segment so that no new process can open it;
// processes that have it open keep using it. It removes nothing if the
// name now belongs to another segment, and nothing for a memfd segment.
func (s *Segment) Remove() error {
	if s.path == "" {
		return nil
	}
	var st unix.Stat_t
	if err := unix.Stat(s.path, &st); err != nil {
		if err == unix.ENOENT {
			return nil
		}
		return &fs.PathError{Op: "remove segment", Path: s.path, Err: err}
	}
	if st.Dev != s.dev || st.Ino != s.ino {
		return nil
	}
	if err := unix.Unlink(s.path); err != nil && err != unix.ENOENT {
		return &fs.PathError{Op: "remove segment", Path: s.path, Err: err}
	}
	pvRemoved.Add(1)
	return nil
}

// RemoveStale removes the named segments under rings_shm_dir whose names
// start with prefix and that no live process holds (their creators and
// openers all died or closed them without Remove), with the temporary
// files of creations that died half-way. It returns how many it removed.
// Files that are not Tachyon segments are left alone.
func RemoveStale(prefix string) (int, error) {
	if prefix == "" || strings.ContainsRune(prefix, '/') {
		return 0, fmt.Errorf("%w: stale-segment prefix %q", ErrInvalid, prefix)
	}
	dir := shmDir.Get()
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	n := 0
	var firstErr error
	for _, e := range ents {
		name := e.Name()
		tmp := strings.HasPrefix(name, "."+prefix) && strings.Contains(name, ".tmp.")
		if !strings.HasPrefix(name, prefix) && !tmp || !e.Type().IsRegular() {
			continue
		}
		removed, err := removeIfStale(dir, name)
		if removed {
			n++
		} else if err != nil && firstErr == nil {
			firstErr = err
		}
	}
	return n, firstErr
}

// removeIfStale removes dir/name if no process holds a lock on it and it is
// a Tachyon segment (or a temporary file of one).
func removeIfStale(dir, name string) (bool, error) {
	path := filepath.Join(dir, name)
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	if err != nil {
		if err == unix.ENOENT {
			return false, nil
		}
		return false, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		return false, nil // a live process holds it
	}
	var st, cur unix.Stat_t
	if unix.Fstat(fd, &st) != nil || unix.Stat(path, &cur) != nil || st.Dev != cur.Dev || st.Ino != cur.Ino ||
		st.Mode&unix.S_IFMT != unix.S_IFREG {
		return false, nil // replaced meanwhile, or not a plain file
	}
	if !strings.HasPrefix(name, ".") {
		var magic [len(segMagic)]byte
		if k, _ := unix.Pread(fd, magic[:], offSegMagic); k != len(magic) || string(magic[:]) != segMagic {
			return false, nil
		}
	}
	if err := unix.Unlink(path); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return false, nil
		}
		return false, &fs.PathError{Op: "remove stale segment", Path: path, Err: err}
	}
	pvStale.Add(1)
	return true, nil
}
