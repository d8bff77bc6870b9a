package engine

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"syscall"

	"github.com/tachyon-hpc/tachyon/cvar"
)

// HostID names the host this process runs on, as far as the transports
// care: two ranks with the same HostID share memory and talk through a
// segment, others talk over the network. It is the kernel's boot id, the
// network namespace and the file system of the shared-memory directory
// (rings_shm_dir): ranks in different network namespaces, or with
// private /dev/shm mounts, are different hosts even on one machine. With
// engine_net_force every process is a host of its own.
func HostID() string {
	boot, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	id := strings.TrimSpace(string(boot))
	if err != nil {
		id, _ = os.Hostname()
	}
	var st syscall.Stat_t
	if syscall.Stat("/proc/thread-self/ns/net", &st) == nil {
		id += fmt.Sprintf("/net:%d", st.Ino)
	}
	if v, ok := cvar.Lookup("rings_shm_dir"); ok && syscall.Stat(v.String(), &st) == nil {
		id += fmt.Sprintf("/shm:%d:%d", st.Dev, st.Ino)
	}
	if netForce.Get() {
		id += fmt.Sprintf("/pid:%d", os.Getpid())
	}
	return id
}

// HostCPUs returns the CPUs the host has online (/sys/devices/system/cpu/online,
// a list of ranges such as 0-3,6), not this process's affinity: a launcher
// that pins each rank to one CPU does not make the host smaller. It falls
// back to runtime.NumCPU.
func HostCPUs() int {
	b, err := os.ReadFile("/sys/devices/system/cpu/online")
	if err != nil {
		return runtime.NumCPU()
	}
	return countCPUList(strings.TrimSpace(string(b)), runtime.NumCPU())
}
