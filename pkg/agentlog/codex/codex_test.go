package codex_test

import (
	"testing"

	"github.com/sessionlog/sessionlog/pkg/agentlog/agentlogtest"
	"github.com/sessionlog/sessionlog/pkg/agentlog/codex"
	"github.com/sessionlog/sessionlog/pkg/agentlog/pi"
)

// TestFixtures: the mapped events of each fixture (testdata/golden, a
// reviewer reads them as the mapping's spec; -update rewrites them), the
// export to codex deep-equal to the file, and the round trips through
// codex and pi keeping the model-visible context.
func TestFixtures(t *testing.T) {
	agentlogtest.Suite(t, codex.Format{}, "testdata/sessions/*/*/*/rollout-*.jsonl", codex.Format{}, pi.Format{})
}

// TestRepairedExportAnswersEveryCall: the main fixture ends in a call
// without a result; repaired and exported to codex or pi, every call has
// exactly one result, the unknown one an error that says to check.
func TestRepairedExportAnswersEveryCall(t *testing.T) {
	agentlogtest.SuiteRepaired(t, codex.Format{}, "testdata/sessions/*/*/*/rollout-*-0197d8a1-*.jsonl", codex.Format{}, pi.Format{})
}
