// Package procstat reads what this process has used so far, for
// benchmarks: a shared machine's load swings a rate far more than the CPU
// or the system calls an operation costs.
package procstat

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// CPU is the user and system CPU time of this process so far (0 where
// it cannot be read).
func CPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// SysIO is the number of read and write system calls of this process so
// far, from /proc/self/io (Linux; 0 and 0 elsewhere).
func SysIO() (reads, writes int64) {
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return 0, 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "syscr: "); ok {
			reads, _ = strconv.ParseInt(v, 10, 64)
		} else if v, ok := strings.CutPrefix(l, "syscw: "); ok {
			writes, _ = strconv.ParseInt(v, 10, 64)
		}
	}
	return reads, writes
}
