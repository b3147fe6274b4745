package httpapi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/sessionlog/sessionlog/internal/gen"
	"github.com/sessionlog/sessionlog/pkg/acp"
	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/services/projector/httpapi"
	"github.com/sessionlog/sessionlog/services/projector/internal/projectortest"
)

// acpLine is one NDJSON line of GET /acp, with the seq its update came from.
type acpLine struct {
	n   acp.Notification
	seq uint64
	raw string
}

// acpStream reads GET /v1/sessions/{id}/acp lines as they come.
func acpStream(t *testing.T, ctx context.Context, url string) <-chan acpLine {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		t.Fatalf("acp: %d", resp.StatusCode)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/x-ndjson" {
		t.Errorf("Content-Type %q", ct)
	}
	ch := make(chan acpLine, 10000)
	go func() {
		defer close(ch)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var l struct {
				acp.Notification
				Params struct {
					Update struct {
						Meta struct {
							S struct {
								Seq uint64 `json:"seq"`
							} `json:"sessionlog"`
						} `json:"_meta"`
					} `json:"update"`
				} `json:"params"`
			}
			if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
				t.Errorf("line %q: %v", sc.Text(), err)
				return
			}
			ch <- acpLine{n: l.Notification, seq: l.Params.Update.Meta.S.Seq, raw: sc.Text()}
		}
	}()
	return ch
}

// wantLines is what the mapping makes of evs, as JSON lines.
func wantLines(t *testing.T, id string, evs []schema.Envelope) []string {
	var out []string
	for i := range evs {
		// Round-trip through the stored form, as the projector reads it.
		b, err := schema.Encode(&evs[i])
		if err != nil {
			t.Fatal(err)
		}
		ev, err := schema.Decode(b)
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range acp.Map(&ev) {
			b, _ := json.Marshal(acp.Notify(id, u))
			out = append(out, string(b))
		}
	}
	return out
}

// readLines takes n lines from ch.
func readLines(t *testing.T, ch <-chan acpLine, n int) []acpLine {
	t.Helper()
	var out []acpLine
	timeout := time.After(20 * time.Second)
	for len(out) < n {
		select {
		case l, ok := <-ch:
			if !ok {
				t.Fatalf("stream ended after %d of %d lines", len(out), n)
			}
			out = append(out, l)
		case <-timeout:
			t.Fatalf("%d of %d lines after 20s", len(out), n)
		}
	}
	return out
}

func sameLines(t *testing.T, what string, got []acpLine, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d lines, want %d", what, len(got), len(want))
	}
	for i := range got {
		if got[i].raw != want[i] {
			t.Fatalf("%s: line %d:\n got %s\nwant %s", what, i, got[i].raw, want[i])
		}
	}
}

func TestACPReplayFollowAndResume(t *testing.T) {
	e := projectortest.NewEnv(t)
	r := e.Start(t.TempDir())
	r.WaitReady(t)
	const id = "acp-1"
	s := gen.NewSession(id, time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC))
	first := projectortest.PublishN(t, e, s, 40)
	r.WaitSession(t, id, func(d httpapi.Detail) bool { return d.LastSeq == 40 })

	// Without follow: the whole session, then the end of the response.
	ctx, cancel := context.WithCancel(e.Ctx)
	defer cancel()
	all := wantLines(t, id, first)
	var got []acpLine
	for l := range acpStream(t, ctx, r.Srv.URL+"/v1/sessions/"+id+"/acp") {
		got = append(got, l)
	}
	sameLines(t, "replay", got, all)

	// Follow: the replay, then an append made during the request.
	fctx, fcancel := context.WithCancel(e.Ctx)
	ch := acpStream(t, fctx, r.Srv.URL+"/v1/sessions/"+id+"/acp?follow=1")
	sameLines(t, "follow replay", readLines(t, ch, len(all)), all)
	during := projectortest.PublishN(t, e, s, 15)
	want := wantLines(t, id, during)
	live := readLines(t, ch, len(want))
	sameLines(t, "live", live, want)
	// The client goes away after a seq in the middle of the live events;
	// more events come while it is gone.
	cut := live[len(live)/2].seq
	fcancel()
	later := projectortest.PublishN(t, e, s, 10)

	// A reconnect after the cut misses and doubles nothing: it starts
	// with the first event after it and goes on live.
	var rest []schema.Envelope
	for _, ev := range append(append([]schema.Envelope{}, during...), later...) {
		if ev.Seq > cut {
			rest = append(rest, ev)
		}
	}
	want = wantLines(t, id, rest)
	ch = acpStream(t, ctx, r.Srv.URL+fmt.Sprintf("/v1/sessions/%s/acp?follow=1&after=%d", id, cut))
	sameLines(t, "resumed", readLines(t, ch, len(want)), want)
	more := projectortest.PublishN(t, e, s, 3)
	want = wantLines(t, id, more)
	sameLines(t, "resumed live", readLines(t, ch, len(want)), want)
	select {
	case l := <-ch:
		t.Fatalf("a line no event made: %s", l.raw)
	default:
	}

	// The same resume named by the event id of the cut.
	var cutID string
	for _, ev := range during {
		if ev.Seq == cut {
			cutID = ev.EventID
		}
	}
	got = nil
	for l := range acpStream(t, ctx, r.Srv.URL+"/v1/sessions/"+id+"/acp?afterEventId="+cutID) {
		got = append(got, l)
	}
	sameLines(t, "after event id", got, wantLines(t, id, append(rest, more...)))

	// And following from that event id: the same, then live.
	want = wantLines(t, id, append(rest, more...))
	ch = acpStream(t, ctx, r.Srv.URL+"/v1/sessions/"+id+"/acp?follow=1&afterEventId="+cutID)
	sameLines(t, "followed after event id", readLines(t, ch, len(want)), want)
	last := projectortest.PublishN(t, e, s, 2)
	want = wantLines(t, id, last)
	sameLines(t, "followed after event id, live", readLines(t, ch, len(want)), want)
}

// TestACPBadRequests: replay requests the HTTP side refuses (400) or
// finds nothing for (404), over the views of a session of three events
// (the HTTP side alone: projectortest.Serve).
func TestACPBadRequests(t *testing.T) {
	l := projectortest.NewMem(t)
	s := gen.NewSession("acp-bad", time.Now())
	first := s.Next()
	projectortest.AppendMem(t, l, first, s.Next(), s.Next())
	r := projectortest.Serve(t, l)
	for _, c := range []struct {
		path string
		code int
	}{
		{"/v1/sessions/nope/acp", 404},
		{"/v1/sessions/a.b/acp", 400},
		{"/v1/sessions/acp-bad/acp?after=x", 400},
		{"/v1/sessions/acp-bad/acp?after=99", 400},
		{"/v1/sessions/acp-bad/acp?follow=maybe", 400},
		{"/v1/sessions/acp-bad/acp?afterEventId=nope", 400},
		{"/v1/sessions/acp-bad/acp?afterEventId=a/b", 400},
		{"/v1/sessions/acp-bad/acp?after=1&afterEventId=x", 400},
		// Both, the event id the session's first event's.
		{"/v1/sessions/acp-bad/acp?after=1&afterEventId=" + first.EventID, 400},
		{"/v1/sessions/nope/acp?afterEventId=x", 404},
	} {
		if code, body := r.Get(t, c.path); code != c.code {
			t.Errorf("GET %s: %d %s, want %d", c.path, code, body, c.code)
		}
	}
}

// TestACPReplayLeavesOutAbandoned: a replay gives the conversation the
// model continues: what a context/rewound abandoned (the messages, the
// call and its start and result) is not replayed; the rest is.
func TestACPReplayLeavesOutAbandoned(t *testing.T) {
	e := projectortest.NewEnv(t)
	r := e.Start(t.TempDir())
	r.WaitReady(t)
	const id = "acp-rw"
	var evs []schema.Envelope
	add := func(typ, data string, mod ...func(*schema.Envelope)) {
		ev := schema.Envelope{SchemaVersion: schema.Version, SessionID: id, Seq: uint64(len(evs) + 1), EventID: fmt.Sprintf("e%d", len(evs)+1),
			Time: time.Date(2026, 12, 4, 10, 0, len(evs), 0, time.UTC), Type: typ, Data: json.RawMessage(data)}
		for _, m := range mod {
			m(&ev)
		}
		if _, err := gen.Publish(e.Ctx, e.LS, ev); err != nil {
			t.Fatal(err)
		}
		evs = append(evs, ev)
	}
	turn := func(ev *schema.Envelope) { ev.TurnID = "t1" }
	call := func(ev *schema.Envelope) { ev.TurnID, ev.ToolCallID = "t1", "c1" }
	add(schema.TypeSessionCreated, `{}`)                            // 1
	add(schema.TypeTurnStarted, `{}`, turn)                         // 2
	add(schema.TypeMessageUser, `{"content":"one"}`, turn)          // 3
	add(schema.TypeToolRequested, `{"name":"sh","input":{}}`, call) // 4
	add(schema.TypeToolStarted, `{}`, call)                         // 5
	add(schema.TypeToolResult, `{"status":"ok"}`, call)             // 6
	add(schema.TypeMessageUser, `{"content":"two"}`, turn)          // 7
	add(schema.TypeContextRewound, `{"toEventId":"e3","toSeq":3}`)  // 8
	add(schema.TypeMessageUser, `{"content":"two, again"}`, turn)   // 9
	r.WaitSession(t, id, func(d httpapi.Detail) bool { return d.LastSeq == 9 })

	var kept []schema.Envelope
	for _, ev := range evs {
		if ev.Seq < 4 || ev.Seq > 7 {
			kept = append(kept, ev)
		}
	}
	var got []acpLine
	for l := range acpStream(t, e.Ctx, r.Srv.URL+"/v1/sessions/"+id+"/acp") {
		got = append(got, l)
	}
	sameLines(t, "replay", got, wantLines(t, id, kept))
}
