package writer_test

import (
	"context"
	"testing"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// The record is the line (DESIGN.md section 14): once the erasure record
// exists and the erase has sealed the session (deleted its first event
// and its tail), an append from this writer, whose state of the session
// is cached, fails the stream's per-subject check, reads the session and
// the record again, and is refused as erased; nothing is stored after
// the record.
func TestAppendRefusedOnceTheErasureSealsTheSession(t *testing.T) {
	e := newEnv(t, envOpts{})
	ctx := context.Background()
	mustOK(t, e.nc, map[string]any{"sessionId": "er-1", "expectedSeq": 0, "events": events(created(),
		ev(schema.TypeMessageUser, "data", map[string]any{"content": "one"}),
		ev(schema.TypeMessageUser, "data", map[string]any{"content": "two"}))})
	// The writer has the session cached: this append reads no record.
	mustOK(t, e.nc, map[string]any{"sessionId": "er-1", "events": events(ev(schema.TypeMessageUser, "data", map[string]any{"content": "three"}))})

	if _, _, err := e.st.MarkErased(ctx, logstore.Erasure{SessionID: "er-1", By: "b", Reason: "r", Phase: logstore.ErasePhaseDeleting}); err != nil {
		t.Fatal(err)
	}
	first, err := e.st.NextAfter(ctx, "er-1", 0)
	if err != nil {
		t.Fatal(err)
	}
	tail, err := e.st.Tail(ctx, "er-1")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.st.SecureDelete(ctx, "er-1", []uint64{first.StreamSeq, tail.StreamSeq}, 1, nil); err != nil {
		t.Fatal(err)
	}
	for _, req := range []map[string]any{
		{"sessionId": "er-1", "events": events(ev(schema.TypeMessageUser, "data", map[string]any{"content": "after"}))},
		{"sessionId": "er-1", "expectedSeq": 4, "events": events(ev(schema.TypeMessageUser, "data", map[string]any{"content": "after"}))},
	} {
		if r := appendReq(t, e.nc, req); r.code() != string(schema.CodeErased) {
			t.Fatalf("append after the seal: %q, want erased", r.code())
		}
	}
	if got := stored(t, e.st, "er-1"); len(got) != 2 {
		t.Fatalf("%d events stored, want the 2 the seal left", len(got))
	}
}
