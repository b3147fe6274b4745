package repairer

import (
	"testing"
	"time"

	"github.com/sessionlog/sessionlog/internal/defaultstest"
)

// A repairer built from a zero Config sweeps every minute, 256 sessions at
// once, as it did before DefaultConfig held its defaults; Grace, where zero
// means at once, is never filled in.
func TestDefaultConfig(t *testing.T) {
	d, filled := DefaultConfig(), Config{}.withDefaults(3)
	defaultstest.Check(t,
		defaultstest.F("SweepInterval", d.SweepInterval, filled.SweepInterval, time.Minute),
		defaultstest.F("Concurrency", d.Concurrency, filled.Concurrency, 256),
		defaultstest.F("StateCacheSize", d.StateCacheSize, filled.StateCacheSize, 10_000),
		defaultstest.F("SweepQueue", d.SweepQueue, filled.SweepQueue, 2048),
		defaultstest.F("MaxDemand", d.MaxDemand, filled.MaxDemand, 64),
		defaultstest.F("GroupEvents", d.GroupEvents, filled.GroupEvents, 1000),
		defaultstest.F("GroupInflight", d.GroupInflight, filled.GroupInflight, 2),
		// The store's, filled by New.
		defaultstest.F("LeaseTTL", d.LeaseTTL, filled.LeaseTTL, time.Duration(0)),
	)
	if g := d.Grace; g != 5*time.Second || filled.Grace != 0 {
		t.Errorf("Grace: DefaultConfig %v, filled %v; want 5s, and zero kept", g, filled.Grace)
	}
	// One replica: one grouped batch in flight. A value given is kept,
	// grouping past the server's limit is not.
	if got := (Config{}).withDefaults(1); got.GroupInflight != 1 {
		t.Errorf("one replica: %d in flight", got.GroupInflight)
	}
	if got := (Config{SweepInterval: -1, GroupEvents: 5000, Concurrency: 3}).withDefaults(1); got.SweepInterval != -1 || got.GroupEvents != 1000 || got.Concurrency != 3 {
		t.Errorf("given values: %+v", got)
	}
}
