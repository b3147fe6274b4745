package ship

import (
	"context"
	"io"
	"testing"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/writertest"
	"github.com/sessionlog/sessionlog/pkg/agentlog/claudecode"
	"github.com/sessionlog/sessionlog/pkg/client"
)

// ship appends through the adapter the source service uses, and reads the
// tail as it does: through the writer, as the writer judges it.
func TestShipReadsTailThroughWriter(t *testing.T) {
	k := writertest.New(t, logstore.Config{})
	sh := New(context.Background(), Config{Client: k.Cl, Format: claudecode.Format{}, Host: "h", Batch: 500, Idle: IdleDefault, Stdout: io.Discard, Stderr: io.Discard})
	writertest.CheckTail(t, k.NC, k.St, sh.log(holderOf("h", "claude-code", "/p/s.jsonl")), "s-ship", "s-ship", client.CodeOf)
}
