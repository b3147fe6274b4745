package bench

import (
	"fmt"
	"os"
	"runtime/pprof"
	"runtime/trace"
)

// CPUProfiler returns a benchmark's Profile hook: start a CPU profile into
// path, and the function that stops it. A profile that cannot start is
// reported and skipped.
func CPUProfiler(path string) func() func() {
	return func() func() {
		stop, err := StartCPUProfile(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, "cpuprofile:", err)
			return func() {}
		}
		return stop
	}
}

// StartCPUProfile starts a CPU profile into path (--cpuprofile) and
// returns the function that stops it and closes the file.
func StartCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

// WithAllocProfile adds to profile (which may be nil) writing the
// allocation profile at its start (path + ".base") and at its stop
// (path): their difference is what the catch-up allocated.
func WithAllocProfile(profile func() func(), path string) func() func() {
	write := func(p string) {
		f, err := os.Create(p)
		if err == nil {
			err = pprof.Lookup("allocs").WriteTo(f, 0)
			f.Close()
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "memprofile:", err)
		}
	}
	return func() func() {
		write(path + ".base")
		stop := func() {}
		if profile != nil {
			stop = profile()
		}
		return func() {
			stop()
			write(path)
		}
	}
}

// WithTrace adds to profile (which may be nil) an execution trace into
// path.
func WithTrace(profile func() func(), path string) func() func() {
	return func() func() {
		stop := func() {}
		if profile != nil {
			stop = profile()
		}
		f, err := os.Create(path)
		if err == nil {
			if err = trace.Start(f); err != nil {
				f.Close()
			}
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "trace:", err)
			return stop
		}
		return func() {
			trace.Stop()
			f.Close()
			stop()
		}
	}
}
