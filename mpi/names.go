package mpi

import (
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/tachyon-hpc/tachyon/cvar"
	"github.com/tachyon-hpc/tachyon/internal/procid"
)

// The name service (MPI-4.1 section 11.8.5): a service name published
// with a port's name, for processes that know the service but not the
// port. Names live as files in one directory, mpi_name_dir, one per
// service: every process that sees the directory (one host's, or a
// shared file system's) sees the names. A name whose publisher has ended
// without unpublishing it counts as unpublished.

var nameDir = cvar.NewString("mpi_name_dir", "",
	"Directory of the name service (PublishName, LookupName): a file per published service. Empty: tachyon-names-UID under the system's temporary directory, which the processes of one user on one host share; a directory on a shared file system serves several hosts.",
	cvar.WithCategory("mpi"))

// The names this process published, for UnpublishName.
var published struct {
	mu sync.Mutex
	m  map[string]string // service -> port
}

// nameFile returns the file of service, making the directory if needed.
func nameFile(op, service string) (string, error) {
	if service == "" || strings.ContainsAny(service, "\x00") {
		return "", errorf(ErrArg, op, "service name %q: want a non-empty name", service)
	}
	dir := nameDir.Get()
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "tachyon-names-"+strconv.Itoa(os.Getuid()))
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", &Error{Class: ErrOther, Op: op, Detail: "the name service's directory", Err: err}
	}
	return filepath.Join(dir, url.PathEscape(service)), nil
}

// PublishName publishes port under service (MPI_PUBLISH_NAME), for
// LookupName. Publishing a name another live process publishes is an
// ErrService error.
func PublishName(service, port string) error {
	if intercepted() {
		c := processCall(OpPublishName)
		c.Name, c.Port = service, port
		return c.run()
	}
	return pPublishName(service, port)
}

// pPublishName is PublishName without interception.
func pPublishName(service, port string) error {
	const op = "PublishName"
	if _, err := portAddr(op, port); err != nil {
		return noComm(err)
	}
	f, err := nameFile(op, service)
	if err != nil {
		return noComm(err)
	}
	pid, start, _ := procid.Self()
	body := fmt.Sprintf("%d %d\n%s\n", pid, start, port)
	for try := 0; ; try++ {
		err = writeExclusive(f, body)
		if !errors.Is(err, fs.ErrExist) || try > 0 {
			break
		}
		if _, live := readName(f); live {
			return noComm(errorf(ErrService, op, "service %q is published by another process", service))
		}
		os.Remove(f) // its publisher ended without unpublishing it
	}
	if err != nil {
		return noComm(&Error{Class: ErrOther, Op: op, Detail: "publishing " + service, Err: err})
	}
	published.mu.Lock()
	if published.m == nil {
		published.m = map[string]string{}
	}
	published.m[service] = port
	published.mu.Unlock()
	return nil
}

// writeExclusive writes a new file, failing with fs.ErrExist if it is
// there: the rename of a complete temporary file makes it appear whole.
func writeExclusive(name, body string) error {
	tmp := fmt.Sprintf("%s.%d.tmp", name, os.Getpid())
	if err := os.WriteFile(tmp, []byte(body), 0o600); err != nil {
		return err
	}
	defer os.Remove(tmp)
	return os.Link(tmp, name) // fails if name exists, unlike rename
}

// readName returns the port published in file f and whether its
// publisher still runs.
func readName(f string) (port string, live bool) {
	b, err := os.ReadFile(f)
	if err != nil {
		return "", false
	}
	who, port, _ := strings.Cut(string(b), "\n")
	var pid int
	var start uint64
	if _, err := fmt.Sscan(who, &pid, &start); err != nil {
		return "", false
	}
	return strings.TrimSpace(port), procid.Alive(pid, start)
}

// LookupName returns the port published under service (MPI_LOOKUP_NAME),
// ErrName if none is (or its publisher has ended).
func LookupName(service string) (string, error) {
	if intercepted() {
		c := processCall(OpLookupName)
		c.Name = service
		r, err := c.runResult()
		return r.Port, err
	}
	return pLookupName(service)
}

// pLookupName is LookupName without interception.
func pLookupName(service string) (string, error) {
	const op = "LookupName"
	f, err := nameFile(op, service)
	if err != nil {
		return "", noComm(err)
	}
	port, live := readName(f)
	if !live {
		return "", noComm(errorf(ErrName, op, "no port is published under %q", service))
	}
	return port, nil
}

// UnpublishName withdraws what PublishName published under service
// (MPI_UNPUBLISH_NAME); ErrService if this process did not publish port
// under it.
func UnpublishName(service, port string) error {
	if intercepted() {
		c := processCall(OpUnpublishName)
		c.Name, c.Port = service, port
		return c.run()
	}
	return pUnpublishName(service, port)
}

// pUnpublishName is UnpublishName without interception.
func pUnpublishName(service, port string) error {
	const op = "UnpublishName"
	published.mu.Lock()
	defer published.mu.Unlock()
	if published.m[service] != port {
		return noComm(errorf(ErrService, op, "this process did not publish %q under %q", port, service))
	}
	f, err := nameFile(op, service)
	if err != nil {
		return noComm(err)
	}
	delete(published.m, service)
	if err := os.Remove(f); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return noComm(&Error{Class: ErrOther, Op: op, Detail: "unpublishing " + service, Err: err})
	}
	return nil
}
