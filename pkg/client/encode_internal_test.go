package client

import (
	"bytes"
	"encoding/json"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sessionlog/sessionlog/pkg/agentlog/agentlogtest"
	"github.com/sessionlog/sessionlog/pkg/agentlog/formats"
	"github.com/sessionlog/sessionlog/pkg/api"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// appendRequests are requests with every member set and unset, and
// events encodeAppend writes by hand and ones it leaves to json.Marshal.
func appendRequests() []api.AppendRequest {
	at := time.Date(2026, 12, 4, 10, 0, 0, 123456789, time.UTC)
	plain := schema.Envelope{SchemaVersion: schema.Version, EventID: "e1", Time: at, Type: "message/user", TurnID: "t.1",
		Data: json.RawMessage(`{"content":"hi"}`)}
	odd := []schema.Envelope{
		plain,
		{SchemaVersion: schema.Version, EventID: "e2", Time: at, Type: "source/line", Ignorable: true, Data: json.RawMessage(`{"line":{"a":"<b>&"}}`)},
		{SchemaVersion: schema.Version, EventID: "e3", Time: at.In(time.FixedZone("x", 3600)), Type: "turn/ended", ToolCallID: "c\u2028", Data: json.RawMessage(`{ "reason" : "completed" }`)},
		{EventID: "e4", Type: "message/user"}, // no version, no data, no time
		{SchemaVersion: 7, SessionID: "s<", Seq: 3, Time: at, Type: "x", Synthetic: true, Data: json.RawMessage(`[1, 2]`)},
	}
	zero, n := uint64(0), uint64(42)
	return []api.AppendRequest{
		{},
		{SessionID: "cc-1", Events: []schema.Envelope{}},
		{SessionID: "cc-1", ExpectedSeq: &zero, Events: []schema.Envelope{plain}},
		{SessionID: "a\"b<>", ExpectedSeq: &n, Holder: "h&1", Events: odd, Takeover: true},
		{SessionID: "cc-2", Holder: "agent", Events: odd[1:3]},
	}
}

// TestEncodeAppend: the request body is the bytes json.Marshal writes.
func TestEncodeAppend(t *testing.T) {
	for i, r := range appendRequests() {
		want, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		got, err := encodeAppend(r)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("request %d: %v\ngot  %s\nwant %s", i, err, got, want)
		}
	}
}

// TestEncodeAppendRealTranscripts: the events real Claude Code, codex and
// pi transcripts map to (pkg/agentlog/testdata/real), sent as mapped and
// as Append fills them in, encode to json.Marshal's bytes, and most take
// the hand-written path (their encoding is canonical).
func TestEncodeAppendRealTranscripts(t *testing.T) {
	events, canonical := 0, 0
	for dir, name := range map[string]string{"cc": "claude-code", "codex": "codex", "pi": "pi"} {
		f, ok := formats.Lookup(name)
		if !ok {
			t.Fatalf("format %s", name)
		}
		files, err := filepath.Glob(filepath.Join("..", "agentlog", "testdata", "real", dir, "*.jsonl"))
		if err != nil || len(files) == 0 {
			t.Fatalf("%s: %v %v", dir, files, err)
		}
		for _, path := range files {
			c, _, _ := agentlogtest.Read(t, f, path)
			for _, s := range c.Sessions {
				expected := s.Plan.FirstSeq - 1
				filled, _ := completeEvents(AppendRequest{SessionID: s.Plan.ID, ExpectedSeq: &expected, Events: bare(s.Events)},
					time.Date(2026, 12, 4, 10, 0, 0, 120000000, time.UTC))
				for _, evs := range [][]schema.Envelope{s.Events, filled} {
					r := api.AppendRequest{SessionID: s.Plan.ID, ExpectedSeq: &expected, Events: evs}
					want, err := json.Marshal(r)
					if err != nil {
						t.Fatal(err)
					}
					if got, err := encodeAppend(r); err != nil || !bytes.Equal(got, want) {
						t.Fatalf("%s: %v\ngot  %s\nwant %s", path, err, got, want)
					}
					for i := range evs {
						enc, err := schema.Encode(&evs[i])
						if err != nil {
							t.Fatal(err)
						}
						events++
						if _, ok, _ := schema.DecodeCanonical(enc); ok {
							canonical++
						}
					}
				}
			}
		}
	}
	if canonical < events/2 {
		t.Fatalf("%d of %d events canonical", canonical, events)
	}
	t.Logf("%d events, %d canonical", events, canonical)
}

// bare is events with what Append fills in left out.
func bare(events []schema.Envelope) []schema.Envelope {
	out := make([]schema.Envelope, len(events))
	for i, e := range events {
		e.SchemaVersion, e.SessionID, e.Seq, e.EventID, e.Time = 0, "", 0, "", time.Time{}
		out[i] = e
	}
	return out
}

func FuzzEncodeAppend(f *testing.F) {
	f.Add("cc-1", "h", uint64(3), true, "e1", "message/user", "t.1", int64(1764842400123456789), []byte(`{"content":"hi <b>"}`))
	f.Add("", "", uint64(0), false, "", "", "", int64(0), []byte(nil))
	f.Fuzz(func(t *testing.T, sid, holder string, seq uint64, takeover bool, eid, typ, turn string, ns int64, data []byte) {
		e := schema.Envelope{SchemaVersion: schema.Version, EventID: eid, Type: typ, TurnID: turn, Time: time.Unix(0, ns).UTC(), Data: data}
		if !json.Valid(data) {
			e.Data = nil
		}
		r := api.AppendRequest{SessionID: sid, Holder: holder, ExpectedSeq: &seq, Takeover: takeover, Events: []schema.Envelope{e, e}}
		want, werr := json.Marshal(r)
		got, gerr := encodeAppend(r)
		if (werr == nil) != (gerr == nil) || werr == nil && !bytes.Equal(got, want) {
			t.Fatalf("%v %v\ngot  %s\nwant %s", gerr, werr, got, want)
		}
	})
}

// BenchmarkEncodeAppend: a batch of 500 events as the import sends it,
// against json.Marshal (x-marshal).
func BenchmarkEncodeAppend(b *testing.B) {
	n := uint64(10)
	r := api.AppendRequest{SessionID: "cc-bench", ExpectedSeq: &n}
	at := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	for i := range 500 {
		r.Events = append(r.Events, schema.Envelope{SchemaVersion: schema.Version, EventID: "u-" + strings.Repeat("x", i%7), Time: at,
			Type: "tool/result", TurnID: "t.1", ToolCallID: "c.1",
			Data: json.RawMessage(`{"status":"ok","output":"` + strings.Repeat("result line\\n", 40) + `"}`)})
	}
	b.Run("hand", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := encodeAppend(r); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("x-marshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(r); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// completeEvents fills in what the writer would: with an expectation the
// events of an agent that sets neither seq nor session go as
// schema.Encode writes them, the bytes the writer stores as they came.
func TestCompleteEventsCanonical(t *testing.T) {
	at := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	events := []schema.Envelope{
		{Type: "message/user", Data: json.RawMessage(`{"content":"hi"}`)},
		{Type: "source/line", Ignorable: true, Data: json.RawMessage(`{"line":{"a":1}}`)},
	}
	expected := uint64(41)
	evs, ids := completeEvents(AppendRequest{SessionID: "cc-1", ExpectedSeq: &expected, Events: events}, at)
	body, err := encodeAppend(api.AppendRequest{SessionID: "cc-1", ExpectedSeq: &expected, Events: evs})
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(body, []byte(`"events":[`)) + len(`"events":[`)
	for k := range evs {
		e, end, ok := schema.CanonicalEventAt(body, i, 3, schema.MaxJSONDepth)
		if !ok {
			t.Fatalf("event %d not canonical in %s", k, body)
		}
		if e.Seq != expected+1+uint64(k) || e.SessionID != "cc-1" || e.EventID != ids[k] || !e.Time.Equal(at) {
			t.Fatalf("event %d: %+v", k, e)
		}
		i = end + 1
	}
	if events[0].Seq != 0 || events[0].SessionID != "" {
		t.Fatal("the caller's events were changed")
	}
	// Without an expectation the writer picks the seqs; one seq given
	// leaves the others to the writer's check.
	for _, req := range []AppendRequest{
		{SessionID: "cc-1", Events: events},
		{SessionID: "cc-1", ExpectedSeq: &expected, Events: []schema.Envelope{{Type: "x", Seq: 42}, {Type: "y"}}},
	} {
		evs, _ := completeEvents(req, at)
		for k, e := range evs {
			if e.Seq != req.Events[k].Seq {
				t.Fatalf("seq %d set on %+v", e.Seq, req)
			}
		}
	}
	// An expectation at the top of the seqs is left to the writer.
	top := uint64(math.MaxUint64)
	if evs, _ := completeEvents(AppendRequest{SessionID: "cc-1", ExpectedSeq: &top, Events: events}, at); evs[0].Seq != 0 {
		t.Fatalf("seq %d after expectation %d", evs[0].Seq, top)
	}
}

// BenchmarkPrepareOne: one small event appended with an expectation, as
// `sessionlog bench append`'s client-1 sends it: filled in and encoded.
func BenchmarkPrepareOne(b *testing.B) {
	n := uint64(10)
	events := []schema.Envelope{{Type: schema.TypeMessageUser, Data: json.RawMessage(`{"content":"benchmark message of a typical small size"}`)}}
	at := time.Date(2026, 12, 4, 10, 0, 0, 123456789, time.UTC)
	b.ReportAllocs()
	for b.Loop() {
		req := AppendRequest{SessionID: "client-1-1796000000000000000-12", ExpectedSeq: &n, Events: events}
		evs, _ := completeEvents(req, at)
		out := req
		out.Events = evs
		if _, err := encodeAppend(out); err != nil {
			b.Fatal(err)
		}
	}
}
