// Package gcpolicy is the garbage collector's policy of a sessionlog
// process: its target when GOGC is not set (SetDefault), the heap's soft
// limit of a service (Limit) and the projector's heap budget (Budget).
// GOGC and GOMEMLIMIT in the environment take precedence over each.
package gcpolicy

import (
	"math"
	"os"
	"runtime/debug"
)

// DefaultGCPercent is the garbage collector's target when GOGC is not set.
// The services keep small live heaps (bounded caches) and allocate per
// message; at Go's default of 100 the collector runs so often that it
// costs the writer about a fifth of its CPU per event (bench append
// reports cpu_us_per_event). 400 trades a few times a small heap for that.
// GOGC (and GOMEMLIMIT) in the environment take precedence.
const DefaultGCPercent = 400

// SetDefault sets the collector's target to DefaultGCPercent unless GOGC
// is set.
func SetDefault() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(DefaultGCPercent)
	}
}

// Limit sets the Go heap's soft limit to limit bytes, unless GOMEMLIMIT
// is set (which takes precedence) or limit is 0 (none).
func Limit(limit int64) {
	if limit > 0 && os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(limit)
	}
}

// Budget sets the heap's soft limit as Limit does and, when the heap has
// a limit and GOGC is not set, turns the proportional target off: the
// collector runs when the heap reaches the limit. A live heap over a
// fifth of the limit would meet the limit before five times itself
// anyway, so this changes only a small heap, which now grows to the
// budget before a collection instead of to five times itself: fewer
// collections, and a peak the same for a short catch-up as for a long
// one. With no limit (a limit of 0 and no GOMEMLIMIT) GOGC 400 stays:
// off would never collect.
func Budget(limit int64) {
	Limit(limit)
	if os.Getenv("GOGC") == "" && debug.SetMemoryLimit(-1) != math.MaxInt64 {
		debug.SetGCPercent(-1)
	}
}
