package source

import (
	"testing"

	"github.com/sessionlog/sessionlog/internal/defaultstest"
)

// The source service's defaults are the values it had before they were
// gathered in DefaultConfig, and New's defaulting gives a zero Config
// exactly them.
func TestDefaultConfig(t *testing.T) {
	d, filled := DefaultConfig(), Config{}.withDefaults()
	defaultstest.Check(t,
		defaultstest.F("MaxConcurrent", d.MaxConcurrent, filled.MaxConcurrent, 256),
		defaultstest.F("SourceStates", d.SourceStates, filled.SourceStates, 128),
		defaultstest.F("MaxSourceBytes", d.MaxSourceBytes, filled.MaxSourceBytes, 64<<20),
	)
	// A value given is kept; negative SourceStates keeps no state.
	if got := (Config{MaxConcurrent: 3, SourceStates: -1}).withDefaults(); got.MaxConcurrent != 3 || got.SourceStates != -1 {
		t.Errorf("given values: %+v", got)
	}
}
