package source

import (
	"testing"

	"github.com/sessionlog/sessionlog/internal/defaultstest"
)

// A source service built from a zero Config serves 256 requests at once
// and keeps 128 mapping states, as it did before DefaultConfig held its
// defaults.
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
