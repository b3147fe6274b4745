package pi_test

import (
	"testing"

	"github.com/sessionlog/sessionlog/pkg/agentlog/agentlogtest"
	"github.com/sessionlog/sessionlog/pkg/agentlog/codex"
	"github.com/sessionlog/sessionlog/pkg/agentlog/pi"
)

// TestFixtures: the mapped events of each fixture (testdata/golden, a
// reviewer reads them as the mapping's spec; -update rewrites them), the
// export to pi deep-equal to the file, and the round trips through pi and
// codex keeping the model-visible context.
func TestFixtures(t *testing.T) {
	agentlogtest.Suite(t, pi.Format{}, "testdata/sessions/*/*.jsonl", pi.Format{}, codex.Format{})
}

// TestRepairedExportAnswersEveryCall: the fixture ends in a call without
// a result; repaired and exported to pi or codex, every call has exactly
// one result, the repaired one an error that says to check.
func TestRepairedExportAnswersEveryCall(t *testing.T) {
	agentlogtest.SuiteRepaired(t, pi.Format{}, "testdata/sessions/*/*.jsonl", pi.Format{}, codex.Format{})
}
