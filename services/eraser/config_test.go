package eraser

import (
	"testing"
	"time"

	"github.com/sessionlog/sessionlog/internal/defaultstest"
)

// The eraser's defaults are the values it had before they were gathered
// in DefaultConfig, and New's defaulting gives a zero Config exactly them.
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
