package codex_test

import (
	"testing"

	"github.com/sessionlog/sessionlog/pkg/agentlog/agentlogtest"
	"github.com/sessionlog/sessionlog/pkg/agentlog/claudecode"
	"github.com/sessionlog/sessionlog/pkg/agentlog/codex"
	"github.com/sessionlog/sessionlog/pkg/agentlog/pi"
)

// TestClaudeCodeSessionsKeepContext: Claude Code sessions exported to
// codex and to pi and imported again keep their model-visible context.
func TestClaudeCodeSessionsKeepContext(t *testing.T) {
	for _, path := range agentlogtest.Files(t, "../claudecode/testdata/projects/*/*.jsonl") {
		t.Run("codex/"+path, func(t *testing.T) { agentlogtest.CheckRoundTrip(t, claudecode.Format{}, path, codex.Format{}) })
		t.Run("pi/"+path, func(t *testing.T) { agentlogtest.CheckRoundTrip(t, claudecode.Format{}, path, pi.Format{}) })
	}
}
