package writer

import (
	"testing"
	"time"

	"github.com/sessionlog/sessionlog/internal/defaultstest"
)

// A writer built from a zero Config caches 10,000 states and takes 1,024
// requests at once, as it did before DefaultConfig held its defaults.
func TestDefaultConfig(t *testing.T) {
	d, filled := DefaultConfig(), Config{}.withDefaults()
	defaultstest.Check(t,
		defaultstest.F("StateCacheSize", d.StateCacheSize, filled.StateCacheSize, 10_000),
		defaultstest.F("MaxConcurrent", d.MaxConcurrent, filled.MaxConcurrent, 1024),
		defaultstest.F("ConflictRetries", d.ConflictRetries, filled.ConflictRetries, 10),
		defaultstest.F("UsageFlush", d.UsageFlush, filled.UsageFlush, time.Second),
		defaultstest.F("SnapshotEvery", d.SnapshotEvery, filled.SnapshotEvery, 10_000),
		// The store's, filled by New.
		defaultstest.F("LeaseTTL", d.LeaseTTL, filled.LeaseTTL, time.Duration(0)),
		defaultstest.F("MaxEventBytes", d.MaxEventBytes, filled.MaxEventBytes, 0),
	)
	// A value given is kept; a negative SnapshotEvery writes no snapshot.
	if got := (Config{MaxConcurrent: 3, SnapshotEvery: -1}).withDefaults(); got.MaxConcurrent != 3 || got.SnapshotEvery != -1 {
		t.Errorf("given values changed: %+v", got)
	}
}
