package eraser

import (
	"testing"
	"time"

	"github.com/sessionlog/sessionlog/internal/defaultstest"
)

// An eraser built from a zero Config resumes erase jobs every minute and
// erases nothing by retention, as it did before DefaultConfig held its
// defaults.
func TestDefaultConfig(t *testing.T) {
	d, filled := DefaultConfig(), Config{}.withDefaults()
	defaultstest.Check(t,
		defaultstest.F("SweepInterval", d.SweepInterval, filled.SweepInterval, time.Minute),
		defaultstest.F("MaxDemand", d.MaxDemand, filled.MaxDemand, 64),
		// No retention unless asked.
		defaultstest.F("RetainClosed", d.RetainClosed, filled.RetainClosed, time.Duration(0)),
		defaultstest.F("ArchiveDir", d.ArchiveDir, filled.ArchiveDir, ""),
	)
	// A value given is kept; a negative interval resumes jobs every
	// eraseResumeEvery.
	if got := (Config{SweepInterval: -1, MaxDemand: 3}).withDefaults(); got.SweepInterval != -1 || got.MaxDemand != 3 {
		t.Errorf("given values: %+v", got)
	}
}
