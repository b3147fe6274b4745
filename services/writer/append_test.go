package writer_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/services/writer"
)

func u64(n uint64) *uint64 { return &n }

// Every refusal of the append table (except the two outcomes that need a
// broken JetStream, tested below): the code in the body and in the micro
// error header, and nothing stored; on one stream, on three partitions
// and on three partitions of an R3 cluster.
func TestAppendErrorCodes(t *testing.T) { natstest.ForEachLayout(t, testAppendErrorCodes) }

func testAppendErrorCodes(t *testing.T, l natstest.Layout) {
	e := newEnvLayout(t, l, envOpts{})
	nc := e.nc
	ctx := context.Background()

	// Sessions in the states the cases need.
	mustOK(t, nc, map[string]any{"sessionId": "s1", "expectedSeq": 0, "events": events(created())})
	mustOK(t, nc, map[string]any{"sessionId": "paused", "events": events(created(), ev(schema.TypeSessionPaused, "data", map[string]any{"reason": "operator"}))})
	mustOK(t, nc, map[string]any{"sessionId": "closed", "events": events(created(), ev(schema.TypeSessionClosed, "data", map[string]any{"reason": "done"}))})
	// A fork child as the forker leaves it before fork/committed: written
	// through the store directly, synthetic.
	now := time.Now().UTC()
	if _, err := e.st.Append(ctx, logstore.AppendRequest{SessionID: "child", Events: []schema.Envelope{
		{SchemaVersion: 1, SessionID: "child", Seq: 1, EventID: "child-1", Time: now, Type: schema.TypeSessionCreated, Synthetic: true,
			Data: []byte(`{"parent":{"sessionId":"s1","seedLength":2,"depth":1}}`)},
		{SchemaVersion: 1, SessionID: "child", Seq: 2, EventID: "child-2", Time: now, Type: schema.TypeMessageUser, Synthetic: true,
			Data: []byte(`{"content":"copied"}`)},
	}}); err != nil {
		t.Fatal(err)
	}
	user := ev(schema.TypeMessageUser, "data", map[string]any{"content": "hi"})
	big := ev(schema.TypeMessageUser, "data", map[string]any{"content": strings.Repeat("x", schema.DefaultMaxEventBytes)})
	many := make([]map[string]any, schema.MaxBatchEvents+1)
	for i := range many {
		many[i] = user
	}
	valid := `{"sessionId":"s1","events":[{"type":"message/user","data":{"content":"hi"}}]}`

	for _, tc := range []struct {
		name  string
		body  any
		code  schema.Code
		index int // -1: none
		cur   *uint64
	}{
		{"BadRequest/NotJSON", `{"sessionId":`, schema.CodeBadRequest, -1, nil},
		{"BadRequest/NotAnObject", `[1,2]`, schema.CodeBadRequest, -1, nil},
		{"BadRequest/MissingSessionID", `{"events":[{"type":"message/user","data":{"content":"hi"}}]}`, schema.CodeBadRequest, -1, nil},
		{"BadRequest/SessionIDDot", strings.Replace(valid, `"s1"`, `"a.b"`, 1), schema.CodeBadRequest, -1, nil},
		{"BadRequest/SessionIDStar", strings.Replace(valid, `"s1"`, `"a*"`, 1), schema.CodeBadRequest, -1, nil},
		{"BadRequest/SessionIDGt", strings.Replace(valid, `"s1"`, `"a>"`, 1), schema.CodeBadRequest, -1, nil},
		{"BadRequest/SessionIDSpace", strings.Replace(valid, `"s1"`, `"a b"`, 1), schema.CodeBadRequest, -1, nil},
		{"BadRequest/UnknownField", strings.Replace(valid, `{"sessionId"`, `{"bogus":1,"sessionId"`, 1), schema.CodeBadRequest, -1, nil},
		{"BadRequest/UnknownEventField", strings.Replace(valid, `"type"`, `"bogus":1,"type"`, 1), schema.CodeBadRequest, -1, nil},
		{"BadRequest/DuplicateKey", strings.Replace(valid, `{"sessionId":"s1"`, `{"sessionId":"s1","sessionId":"s2"`, 1), schema.CodeBadRequest, -1, nil},
		{"BadRequest/InvalidUTF8", strings.Replace(valid, `hi`, "h\xffi", 1), schema.CodeBadRequest, -1, nil},
		{"BadRequest/TooDeep", strings.Replace(valid, `"hi"`, strings.Repeat("[", 100)+strings.Repeat("]", 100), 1), schema.CodeBadRequest, -1, nil},
		{"BadRequest/NoEvents", map[string]any{"sessionId": "s1", "events": []any{}}, schema.CodeBadRequest, -1, nil},
		{"BadRequest/Holder", map[string]any{"sessionId": "s1", "holder": "a b", "events": events(user)}, schema.CodeBadRequest, -1, nil},
		{"InvalidEvent/Synthetic", map[string]any{"sessionId": "s1", "events": events(user, ev(schema.TypeMessageUser, "synthetic", true, "data", map[string]any{"content": "x"}))}, schema.CodeInvalidEvent, 1, nil},
		{"InvalidEvent/RepairApplied", map[string]any{"sessionId": "s1", "events": events(ev(schema.TypeRepairApplied, "data", map[string]any{"reason": "x", "closed": []any{}}))}, schema.CodeInvalidEvent, 0, nil},
		{"InvalidEvent/ForkCommitted", map[string]any{"sessionId": "s1", "events": events(ev(schema.TypeForkCommitted, "data", map[string]any{"seedLength": 1}))}, schema.CodeInvalidEvent, 0, nil},
		{"InvalidEvent/MissingID", map[string]any{"sessionId": "s1", "events": events(ev(schema.TypeToolStarted, "turnId", "t1"))}, schema.CodeInvalidEvent, 0, nil},
		{"InvalidEvent/OtherSession", map[string]any{"sessionId": "s1", "events": events(ev(schema.TypeMessageUser, "sessionId", "s2", "data", map[string]any{"content": "x"}))}, schema.CodeInvalidEvent, 0, nil},
		{"InvalidEvent/RepeatedEventID", map[string]any{"sessionId": "s1", "events": events(ev(schema.TypeMessageUser, "eventId", "x1", "data", map[string]any{"content": "x"}), ev(schema.TypeMessageUser, "eventId", "x1", "data", map[string]any{"content": "x"}))}, schema.CodeInvalidEvent, 1, nil},
		{"UnknownType", map[string]any{"sessionId": "s1", "events": events(user, ev("foo/bar"))}, schema.CodeUnknownType, 1, nil},
		{"Structure/ResultWithoutRequest", map[string]any{"sessionId": "s1", "events": events(ev(schema.TypeTurnStarted, "turnId", "t1"), ev(schema.TypeToolResult, "turnId", "t1", "toolCallId", "c1", "data", map[string]any{"status": "ok"}))}, schema.CodeStructure, 1, nil},
		{"Structure/FirstNotCreated", map[string]any{"sessionId": "fresh", "events": events(user)}, schema.CodeStructure, 0, nil},
		{"Conflict/Behind", map[string]any{"sessionId": "s1", "expectedSeq": 5, "events": events(user)}, schema.CodeConflict, -1, u64(1)},
		{"Conflict/MustNotExist", map[string]any{"sessionId": "s1", "expectedSeq": 0, "events": events(user)}, schema.CodeConflict, -1, u64(1)},
		{"Paused", map[string]any{"sessionId": "paused", "events": events(ev(schema.TypeTurnStarted, "turnId", "t1"))}, schema.CodePaused, 0, nil},
		{"Closed", map[string]any{"sessionId": "closed", "events": events(user)}, schema.CodeClosed, 0, nil},
		{"Forking", map[string]any{"sessionId": "child", "events": events(user)}, schema.CodeForking, 0, nil},
		{"TooLarge/Event", map[string]any{"sessionId": "s1", "events": events(big)}, schema.CodeTooLarge, 0, nil},
		{"TooLarge/Batch", map[string]any{"sessionId": "s1", "events": many}, schema.CodeTooLarge, -1, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := streamMsgs(t, e.nc)
			r := request(t, nc, logstore.SubjectAppend, tc.body)
			if r.err == nil {
				t.Fatalf("committed %+v, want %s", r.ok, tc.code)
			}
			if r.err.Code != tc.code || r.header != string(tc.code) {
				t.Fatalf("code %s (header %q): %s; want %s", r.err.Code, r.header, r.err.Message, tc.code)
			}
			if r.err.Message == "" {
				t.Fatal("empty message")
			}
			gotIndex := -1
			if r.err.Index != nil {
				gotIndex = *r.err.Index
			}
			if gotIndex != tc.index {
				t.Errorf("index %d, want %d (%s)", gotIndex, tc.index, r.err.Message)
			}
			if (tc.cur == nil) != (r.err.CurrentSeq == nil) || (tc.cur != nil && *tc.cur != *r.err.CurrentSeq) {
				t.Errorf("currentSeq %v, want %v", r.err.CurrentSeq, tc.cur)
			}
			if after := streamMsgs(t, e.nc); after != before {
				t.Fatalf("stream went from %d to %d messages", before, after)
			}
		})
	}
	// The refusals left the sessions as they were.
	for sid, n := range map[string]int{"s1": 1, "paused": 2, "closed": 2, "child": 2, "fresh": 0} {
		if got := len(stored(t, e.st, sid)); got != n {
			t.Errorf("%s has %d events, want %d", sid, got, n)
		}
	}
}

// A reply's fields and the stored envelopes the writer completed.
func TestAppendFillsEnvelope(t *testing.T) {
	e := newEnv(t, envOpts{})
	r := mustOK(t, e.nc, map[string]any{"sessionId": "s1", "expectedSeq": 0, "events": events(created(),
		ev(schema.TypeMessageUser, "eventId", "client-id", "data", map[string]any{"content": "hi"}))})
	if r.SessionID != "s1" || r.FirstSeq != 1 || r.LastSeq != 2 || r.StreamSeq != 2 || r.Duplicate {
		t.Fatalf("reply %+v", r)
	}
	evs := stored(t, e.st, "s1")
	if len(evs) != 2 {
		t.Fatalf("%d events", len(evs))
	}
	for i, ev := range evs {
		if ev.SchemaVersion != 1 || ev.SessionID != "s1" || ev.Seq != uint64(i+1) || ev.EventID == "" || ev.Time.IsZero() {
			t.Errorf("event %d incomplete: %+v", i, ev.Envelope)
		}
		if err := schema.Validate(&ev.Envelope, schema.ValidateOptions{Origin: schema.OriginService, Stored: true}); err != nil {
			t.Errorf("event %d: %v", i, err)
		}
	}
	if evs[1].EventID != "client-id" {
		t.Errorf("client event id replaced: %s", evs[1].EventID)
	}
	// Omitted expectedSeq appends after the tail; a seq given in the
	// request is an expectation.
	if r := mustOK(t, e.nc, map[string]any{"sessionId": "s1", "events": events(ev(schema.TypeMessageUser, "data", map[string]any{"content": "x"}))}); r.FirstSeq != 3 {
		t.Fatalf("append after tail: %+v", r)
	}
	if r := appendReq(t, e.nc, map[string]any{"sessionId": "s1", "events": events(ev(schema.TypeMessageUser, "seq", 3, "data", map[string]any{"content": "x"}))}); r.code() != "conflict" {
		t.Fatalf("stale seq: %s", r.code())
	}
	if r := mustOK(t, e.nc, map[string]any{"sessionId": "s1", "events": events(ev(schema.TypeMessageUser, "seq", 4, "data", map[string]any{"content": "x"}))}); r.FirstSeq != 4 {
		t.Fatalf("seq 4: %+v", r)
	}
}

// The same request twice: the second is a duplicate with the original
// seqs, stored once; with and without expectedSeq, for one event and a
// batch, and for a retry older than the writer's remembered ids; on every
// layout.
func TestAppendDuplicateRetry(t *testing.T) { natstest.ForEachLayout(t, testAppendDuplicateRetry) }

func testAppendDuplicateRetry(t *testing.T, l natstest.Layout) {
	e := newEnvLayout(t, l, envOpts{})
	mustOK(t, e.nc, map[string]any{"sessionId": "s1", "expectedSeq": 0, "events": events(created())})
	user := func(id string) map[string]any {
		return ev(schema.TypeMessageUser, "eventId", id, "data", map[string]any{"content": id})
	}
	for _, tc := range []struct {
		name string
		req  map[string]any
	}{
		{"ExpectedSeq/One", map[string]any{"expectedSeq": 1, "events": events(user("a1"))}},
		{"ExpectedSeq/Batch", map[string]any{"expectedSeq": 2, "events": events(user("b1"), user("b2"), user("b3"))}},
		{"Tail/One", map[string]any{"events": events(user("c1"))}},
		{"Tail/Batch", map[string]any{"events": events(user("d1"), user("d2"))}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.req["sessionId"] = "s1"
			first := mustOK(t, e.nc, tc.req)
			before := streamMsgs(t, e.nc)
			again := mustOK(t, e.nc, tc.req)
			if !again.Duplicate || first.Duplicate || again.FirstSeq != first.FirstSeq || again.LastSeq != first.LastSeq || again.StreamSeq != first.StreamSeq {
				t.Fatalf("first %+v, retry %+v", first, again)
			}
			if streamMsgs(t, e.nc) != before {
				t.Fatal("retry stored something")
			}
		})
	}
	// Push the first request out of the remembered ids, then retry it
	// (explicit expectation: answered from the log), and through a second
	// writer that never saw it (cold cache).
	for i := 0; i < 100; i++ {
		mustOK(t, e.nc, map[string]any{"sessionId": "s1", "events": events(user("z" + itoa(i)))})
	}
	old := map[string]any{"sessionId": "s1", "expectedSeq": 1, "events": events(user("a1"))}
	if r := mustOK(t, e.nc, old); !r.Duplicate || r.FirstSeq != 2 {
		t.Fatalf("old retry: %+v", r)
	}
	batch := map[string]any{"sessionId": "s1", "expectedSeq": 2, "events": events(user("b1"), user("b2"), user("b3"))}
	if r := mustOK(t, e.nc, batch); !r.Duplicate || r.FirstSeq != 3 || r.LastSeq != 5 {
		t.Fatalf("old batch retry: %+v", r)
	}
	// Reusing a stored id for another event at another position is refused.
	if r := appendReq(t, e.nc, map[string]any{"sessionId": "s1", "expectedSeq": 2, "events": events(user("b1"), user("new"))}); r.code() != string(schema.CodeInvalidEvent) {
		t.Fatalf("partly stored batch: %s", r.code())
	}
	if n := len(stored(t, e.st, "s1")); n != 1+1+3+1+2+100 {
		t.Fatalf("%d events stored", n)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// The writer relays nothing transient: a live event on sessions.live.<id>
// is never stored.
func TestNoTransientRelay(t *testing.T) {
	e := newEnv(t, envOpts{})
	mustOK(t, e.nc, map[string]any{"sessionId": "s1", "events": events(created())})
	subj, _ := logstore.LiveSubject("s1")
	if err := e.nc.Publish(subj, []byte(`{"afterSeq":1,"data":{"delta":"tok"}}`)); err != nil {
		t.Fatal(err)
	}
	if err := e.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	// A durable append afterwards is ordered after the live publish on the
	// same connection: once it is stored, the live one would have been.
	r := mustOK(t, e.nc, map[string]any{"sessionId": "s1", "events": events(ev(schema.TypeMessageUser, "data", map[string]any{"content": "x"}))})
	if r.LastSeq != 2 || streamMsgs(t, e.nc) != 2 {
		t.Fatalf("stream holds %d messages, reply %+v", streamMsgs(t, e.nc), r)
	}
}

var _ = natstest.CheckFor
var _ = writer.ServiceName

// The writer serves on the connection it is given, never one taken from
// the store: without it, New refuses.
func TestNewNeedsConn(t *testing.T) {
	e := newEnv(t, envOpts{})
	if _, err := writer.New(writer.Config{Store: e.st}); err == nil || !strings.Contains(err.Error(), "Conn") {
		t.Fatalf("New without Conn: %v, want an error naming Conn", err)
	}
	if _, err := writer.New(writer.Config{Store: e.st, Conn: e.nc}); err != nil {
		t.Fatal(err)
	}
}
