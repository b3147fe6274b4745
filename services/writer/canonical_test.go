package writer_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// storedBodies is every stored message body of a session.
func storedBodies(t *testing.T, st *logstore.Store, sid string) []string {
	t.Helper()
	var out []string
	if _, err := st.ReadSession(context.Background(), sid, 0, func(m *logstore.Msg) error {
		out = append(out, string(m.Data))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// An event sent as schema.Encode writes it is stored byte for byte as it
// came; one the writer completes (seq, time) is stored as its encoding
// after that; a canonical event that breaks a rule is refused with its
// code and nothing is stored.
func TestAppendStoresCanonicalBodies(t *testing.T) {
	e := newEnv(t, envOpts{})
	ctx := context.Background()
	at := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	enc := func(ev schema.Envelope) string {
		t.Helper()
		b, err := schema.Encode(&ev)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	ev := func(seq uint64, id, typ, data string) schema.Envelope {
		return schema.Envelope{SchemaVersion: schema.Version, SessionID: "canon-1", Seq: seq, EventID: id, Time: at, Type: typ, Data: []byte(data)}
	}
	first := []string{
		enc(ev(1, "e1", schema.TypeSessionCreated, `{"title":"t"}`)),
		enc(ev(2, "e2", schema.TypeMessageUser, `{"content":"hi \"there\"\n"}`)),
	}
	if _, err := e.w.Append(ctx, []byte(`{"sessionId":"canon-1","expectedSeq":0,"events":[`+strings.Join(first, ",")+`]}`)); err != nil {
		t.Fatal(err)
	}
	if got := storedBodies(t, e.st, "canon-1"); strings.Join(got, "\n") != strings.Join(first, "\n") {
		t.Fatalf("stored\n%s\nsent\n%s", strings.Join(got, "\n"), strings.Join(first, "\n"))
	}

	// The zero time (seq given) and seq 0 (time given): canonical,
	// completed by the writer.
	zero := ev(3, "e3", schema.TypeMessageUser, `{"content":"again"}`)
	zero.Time = time.Time{}
	noSeq := ev(0, "e4", schema.TypeMessageUser, `{"content":"more"}`)
	for _, c := range []schema.Envelope{zero, noSeq} {
		if _, err := e.w.Append(ctx, []byte(`{"sessionId":"canon-1","events":[`+enc(c)+`]}`)); err != nil {
			t.Fatal(err)
		}
	}
	got := storedBodies(t, e.st, "canon-1")
	if len(got) != 4 {
		t.Fatalf("%d events stored, want 4", len(got))
	}
	for i, id := range []string{"e3", "e4"} {
		d, canonical, err := schema.DecodeCanonical([]byte(got[2+i]))
		if err != nil || !canonical || d.Seq != uint64(3+i) || d.Time.IsZero() || d.EventID != id {
			t.Fatalf("completed event stored as %s (canonical %v, %v)", got[2+i], canonical, err)
		}
	}

	// Canonical but refused: nothing stored.
	for _, c := range []struct {
		code schema.Code
		ev   schema.Envelope
	}{
		{schema.CodeInvalidEvent, schema.Envelope{SchemaVersion: schema.Version, SessionID: "other", Seq: 5, EventID: "e5", Time: at, Type: schema.TypeMessageUser, Data: []byte(`{"content":"x"}`)}},
		{schema.CodeUnknownType, ev(5, "e5", "no/such-type", `{}`)},
		{schema.CodeConflict, ev(9, "e5", schema.TypeMessageUser, `{"content":"x"}`)},
		{schema.CodeBadRequest, ev(5, "e6", schema.TypeMessageUser, `{"content":"x","content":"y"}`)},
	} {
		_, err := e.w.Append(ctx, []byte(`{"sessionId":"canon-1","events":[`+enc(c.ev)+`]}`))
		if schema.CodeOf(err) != c.code {
			t.Errorf("%s: %v, want %s", enc(c.ev), err, c.code)
		}
	}
	if n := len(storedBodies(t, e.st, "canon-1")); n != 4 {
		t.Fatalf("%d events stored after refusals, want 4", n)
	}

	// An empty event id (Encode writes it): the writer's id is stored,
	// never the empty one the body holds.
	noID := ev(1, "", schema.TypeSessionCreated, `{"title":"t"}`)
	noID.SessionID = "canon-2"
	if _, err := e.w.Append(ctx, []byte(`{"sessionId":"canon-2","events":[`+enc(noID)+`]}`)); err != nil {
		t.Fatal(err)
	}
	got = storedBodies(t, e.st, "canon-2")
	if len(got) != 1 {
		t.Fatalf("%d events stored, want 1", len(got))
	}
	if d, canonical, err := schema.DecodeCanonical([]byte(got[0])); err != nil || !canonical || d.EventID == "" {
		t.Fatalf("event without an id stored as %s (canonical %v, %v)", got[0], canonical, err)
	}
}
