package logstore_test

import (
	"context"
	"testing"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
)

// A stream takes at most 1000 consumers by default, and an ordered
// consumer stays on the server after Stop until its inactive threshold.
// Reads of long sessions must not use them up (found by the e2e fault
// suite: after a few minutes every fold failed with err 10026).
func TestReadSessionReleasesConsumers(t *testing.T) {
	srv := natstest.RunServer(t)
	nc := natstest.Connect(t, srv)
	st := open(t, nc, logstore.Config{})
	ctx := context.Background()
	if _, err := st.Append(ctx, logstore.AppendRequest{SessionID: "long", Events: events("long", 1, 20, "e")}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 1100; i++ {
		evs, _, err := st.ReadEvents(ctx, "long", 0)
		if err != nil || len(evs) != 20 {
			t.Fatalf("read %d: %d events, %v", i, len(evs), err)
		}
	}
}
