package forker

import (
	"testing"
	"time"

	"github.com/sessionlog/sessionlog/internal/defaultstest"
)

// A forker built from a zero Config copies in batches of 1,000, 8 forks at
// once, as it did before DefaultConfig held its defaults; a batch over the
// server's limit is cut to it.
func TestDefaultConfig(t *testing.T) {
	d, filled := DefaultConfig(), Config{}.withDefaults()
	defaultstest.Check(t,
		defaultstest.F("BatchSize", d.BatchSize, filled.BatchSize, 1000),
		defaultstest.F("MaxConcurrent", d.MaxConcurrent, filled.MaxConcurrent, 8),
		defaultstest.F("SweepEvery", d.SweepEvery, filled.SweepEvery, 30*time.Second),
		defaultstest.F("StaleAfter", d.StaleAfter, filled.StaleAfter, 30*time.Second),
		defaultstest.F("ForkTimeout", d.ForkTimeout, filled.ForkTimeout, 30*time.Minute),
		defaultstest.F("ScanBodyBudget", d.ScanBodyBudget, filled.ScanBodyBudget, 48<<20),
	)
	// A value given is kept, a batch over the server's limit is not, and
	// a negative budget keeps no bodies.
	if got := (Config{BatchSize: 1, ScanBodyBudget: -1}).withDefaults(); got.BatchSize != 2 || got.ScanBodyBudget != -1 {
		t.Errorf("batch 1, budget -1: %+v", got)
	}
	if got := (Config{BatchSize: 5000, MaxConcurrent: 3}).withDefaults(); got.BatchSize != 1000 || got.MaxConcurrent != 3 {
		t.Errorf("batch 5000, 3 at once: %+v", got)
	}
}
