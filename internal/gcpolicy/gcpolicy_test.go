package gcpolicy

import (
	"math"
	"runtime/debug"
	"testing"
)

// The projector's heap budget: with a limit (its flag or GOMEMLIMIT) the
// collector runs at the limit, not at GOGC 400's five times what is live;
// with no limit GOGC 400 stays (off would never collect); GOGC in the
// environment wins.
func TestProjectorMemoryBudget(t *testing.T) {
	pct := debug.SetGCPercent(DefaultGCPercent)
	lim := debug.SetMemoryLimit(math.MaxInt64)
	t.Cleanup(func() {
		debug.SetGCPercent(pct)
		debug.SetMemoryLimit(lim)
	})
	for _, tc := range []struct {
		name           string
		gogc, memlimit string // environment
		runtimeLimit   int64  // what the runtime took from GOMEMLIMIT at start
		flag           int64
		wantPct        int
		wantLimit      int64
	}{
		{name: "flag", flag: 320 << 20, wantPct: -1, wantLimit: 320 << 20},
		{name: "no limit", flag: 0, wantPct: DefaultGCPercent, wantLimit: math.MaxInt64},
		{name: "GOMEMLIMIT wins", memlimit: "100MiB", runtimeLimit: 100 << 20, flag: 320 << 20, wantPct: -1, wantLimit: 100 << 20},
		{name: "GOMEMLIMIT alone", memlimit: "100MiB", runtimeLimit: 100 << 20, flag: 0, wantPct: -1, wantLimit: 100 << 20},
		{name: "GOGC wins", gogc: "200", flag: 320 << 20, wantPct: DefaultGCPercent, wantLimit: 320 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("GOGC", tc.gogc)
			t.Setenv("GOMEMLIMIT", tc.memlimit)
			debug.SetGCPercent(DefaultGCPercent)
			debug.SetMemoryLimit(math.MaxInt64)
			if tc.runtimeLimit > 0 {
				debug.SetMemoryLimit(tc.runtimeLimit)
			}
			Budget(tc.flag)
			gotPct := debug.SetGCPercent(DefaultGCPercent)
			gotLimit := debug.SetMemoryLimit(math.MaxInt64)
			if gotPct != tc.wantPct || gotLimit != tc.wantLimit {
				t.Fatalf("GC percent %d, limit %d; want %d, %d", gotPct, gotLimit, tc.wantPct, tc.wantLimit)
			}
		})
	}
}

// Without GOGC a process's collector target is DefaultGCPercent; with
// it, GOGC's.
func TestSetDefault(t *testing.T) {
	pct := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(pct) })
	for _, tc := range []struct {
		gogc string
		want int
	}{{"", DefaultGCPercent}, {"100", 100}} {
		t.Setenv("GOGC", tc.gogc)
		debug.SetGCPercent(100)
		SetDefault()
		if got := debug.SetGCPercent(100); got != tc.want {
			t.Errorf("GOGC=%q: GC percent %d, want %d", tc.gogc, got, tc.want)
		}
	}
}
