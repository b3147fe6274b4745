package otelexport_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/internal/natstest/tamper"
	"github.com/sessionlog/sessionlog/internal/otelexport"
	"github.com/sessionlog/sessionlog/internal/otelexport/otlptest"
	"github.com/sessionlog/sessionlog/internal/sessionfixture"
	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/services/projector"
)

func attrs(kvs []*commonpb.KeyValue) map[string]string {
	m := map[string]string{}
	for _, kv := range kvs {
		v := kv.Value
		switch {
		case v.GetArrayValue() != nil:
			var parts []string
			for _, e := range v.GetArrayValue().Values {
				parts = append(parts, e.GetStringValue())
			}
			m[kv.Key] = strings.Join(parts, ",")
		case v.GetStringValue() != "":
			m[kv.Key] = v.GetStringValue()
		default:
			switch x := v.Value.(type) {
			case *commonpb.AnyValue_IntValue:
				m[kv.Key] = fmt.Sprint(x.IntValue)
			case *commonpb.AnyValue_BoolValue:
				m[kv.Key] = fmt.Sprint(x.BoolValue)
			}
		}
	}
	return m
}

// view is one received span, read for the checks.
type view struct {
	name, trace, id, parent string
	attrs                   map[string]string
	events                  []string
	status                  tracepb.Status_StatusCode
	message                 string
	start, end              time.Time
}

func views(spans []*tracepb.Span) map[string]view {
	out := map[string]view{}
	for _, s := range spans {
		v := view{name: s.Name, trace: hex.EncodeToString(s.TraceId), id: hex.EncodeToString(s.SpanId), parent: hex.EncodeToString(s.ParentSpanId),
			attrs: attrs(s.Attributes), start: time.Unix(0, int64(s.StartTimeUnixNano)).UTC(), end: time.Unix(0, int64(s.EndTimeUnixNano)).UTC()}
		if s.Status != nil {
			v.status, v.message = s.Status.Code, s.Status.Message
		}
		for _, e := range s.Events {
			v.events = append(v.events, e.Name)
		}
		out[v.id] = v
	}
	return out
}

// byKey finds spans by what they are: the turn id of an invoke_agent, the
// attempt id of a chat, the tool call id of an execute_tool.
func byKey(t *testing.T, vs map[string]view) map[string]view {
	t.Helper()
	out := map[string]view{}
	for _, v := range vs {
		var k string
		switch v.name {
		case otelexport.SpanInvokeAgent:
			k = v.attrs["sessionlog.turn.id"]
		case otelexport.SpanChat:
			k = v.attrs["sessionlog.attempt.id"]
		case otelexport.SpanExecuteTool:
			k = v.attrs["gen_ai.tool.call.id"]
		default:
			t.Errorf("span named %q", v.name)
		}
		if _, dup := out[k]; dup {
			t.Errorf("two spans for %s", k)
		}
		out[k] = v
	}
	return out
}

func eventID(evs []schema.Envelope, typ, key string) schema.Envelope {
	for _, e := range evs {
		if e.Type == typ && (e.TurnID == key || e.AttemptID == key || e.ToolCallID == key) {
			return e
		}
	}
	panic(typ + " " + key)
}

// checkFixtureSpans checks the spans of the fixture session: names,
// parents, attributes, events and status.
func checkFixtureSpans(t *testing.T, id string, evs []schema.Envelope, got map[string]view) {
	t.Helper()
	k := byKey(t, got)
	want := map[string]struct {
		name, parent string
		status       tracepb.Status_StatusCode
		msg          string
		events       []string
		attrs        map[string]string
	}{
		"t1": {name: "invoke_agent", status: tracepb.Status_STATUS_CODE_UNSET,
			events: []string{"compaction.started", "compaction.ended", "compaction.started", "compaction.aborted"},
			attrs:  map[string]string{"gen_ai.operation.name": "invoke_agent", "sessionlog.turn.reason": "completed", "gen_ai.agent.name": "fixture"}},
		"a1": {name: "chat", parent: "t1", attrs: map[string]string{"gen_ai.operation.name": "chat", "gen_ai.request.model": "claude-sonnet-4-5",
			"gen_ai.usage.input_tokens": "1200", "gen_ai.usage.output_tokens": "80", "gen_ai.usage.cache_read.input_tokens": "300"}},
		"a2": {name: "chat", parent: "t1", status: tracepb.Status_STATUS_CODE_ERROR, msg: "attempt interrupted: rate_limited"},
		"a3": {name: "chat", parent: "t1", attrs: map[string]string{"gen_ai.usage.input_tokens": "900", "gen_ai.usage.output_tokens": "40"}},
		"call-read": {name: "execute_tool", parent: "t1", events: []string{"tool.started"},
			attrs: map[string]string{"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "Read", "gen_ai.tool.call.id": "call-read", "sessionlog.tool.status": "ok"}},
		"call-test": {name: "execute_tool", parent: "t1", status: tracepb.Status_STATUS_CODE_ERROR, msg: "error",
			events: []string{"approval.requested", "approval.decided", "tool.started"}, attrs: map[string]string{"gen_ai.tool.name": "Bash"}},
		"t2": {name: "invoke_agent", status: tracepb.Status_STATUS_CODE_ERROR, msg: "turn interrupted", events: []string{"repair.applied"},
			attrs: map[string]string{"sessionlog.turn.reason": "interrupted"}},
		"call-write": {name: "execute_tool", parent: "t2", status: tracepb.Status_STATUS_CODE_ERROR,
			msg: "outcome_unknown: the call started and its result was never recorded; check its effect before any retry", events: []string{"tool.started"},
			attrs: map[string]string{"sessionlog.tool.status": "outcome_unknown", "sessionlog.synthetic": "true", "gen_ai.tool.name": "Write"}},
		"call-lint": {name: "execute_tool", parent: "t2", status: tracepb.Status_STATUS_CODE_ERROR, msg: "not_started",
			attrs: map[string]string{"sessionlog.tool.status": "not_started"}},
	}
	if len(k) != len(want) {
		var names []string
		for n := range k {
			names = append(names, n)
		}
		sort.Strings(names)
		t.Errorf("spans %v, want %d", names, len(want))
	}
	for key, w := range want {
		v, ok := k[key]
		if !ok {
			t.Errorf("no span for %s", key)
			continue
		}
		if v.name != w.name {
			t.Errorf("%s: name %q, want %q", key, v.name, w.name)
		}
		if v.attrs["session.id"] != id || v.attrs["gen_ai.conversation.id"] != id {
			t.Errorf("%s: session.id %q gen_ai.conversation.id %q", key, v.attrs["session.id"], v.attrs["gen_ai.conversation.id"])
		}
		// Ids: the trace of the turn's turn/started event, the span of the
		// event that opens it.
		var open schema.Envelope
		switch w.name {
		case "invoke_agent":
			open = eventID(evs, schema.TypeTurnStarted, key)
		case "chat":
			open = eventID(evs, schema.TypeAttemptStarted, key)
		default:
			open = eventID(evs, schema.TypeToolRequested, key)
		}
		if want := otelexport.SpanID(id, open.EventID); v.id != hex.EncodeToString(want[:]) {
			t.Errorf("%s: span id %s, want the one derived from %s", key, v.id, open.EventID)
		}
		if !v.start.Equal(open.Time) {
			t.Errorf("%s: start %v, want %v", key, v.start, open.Time)
		}
		turn := key
		if w.parent != "" {
			turn = w.parent
			if p := k[w.parent]; v.parent != p.id || v.trace != p.trace {
				t.Errorf("%s: parent %s in trace %s, want %s's span %s in %s", key, v.parent, v.trace, w.parent, p.id, p.trace)
			}
		} else if v.parent != "" {
			t.Errorf("%s: a root span with parent %s", key, v.parent)
		}
		if want := otelexport.TraceID(id, eventID(evs, schema.TypeTurnStarted, turn).EventID); v.trace != hex.EncodeToString(want[:]) {
			t.Errorf("%s: trace %s, want the one derived from %s's turn/started", key, v.trace, turn)
		}
		if v.status != w.status || v.message != w.msg {
			t.Errorf("%s: status %v %q, want %v %q", key, v.status, v.message, w.status, w.msg)
		}
		if strings.Join(v.events, ",") != strings.Join(w.events, ",") {
			t.Errorf("%s: events %v, want %v", key, v.events, w.events)
		}
		for a, want := range w.attrs {
			if v.attrs[a] != want {
				t.Errorf("%s: %s = %q, want %q", key, a, v.attrs[a], want)
			}
		}
	}
}

// identity is what must not change between two exports.
func identity(vs map[string]view) []string {
	var out []string
	for _, v := range vs {
		out = append(out, v.trace+"/"+v.id+"/"+v.parent+"/"+v.name)
	}
	sort.Strings(out)
	return out
}

func TestExportToOTLPReceiver(t *testing.T) {
	rcv := otlptest.NewReceiver(t)
	const id = "otel-fixture"
	evs := sessionfixture.Events(id)
	if err := sessionfixture.Check(evs); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	exp, err := otelexport.NewOTLPHTTP(ctx, rcv.URL, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer exp.Shutdown(ctx)
	turns, spans, err := otelexport.Export(ctx, exp, evs)
	if err != nil {
		t.Fatal(err)
	}
	if turns != 2 || spans != 9 {
		t.Errorf("exported %d turns, %d spans; want 2, 9", turns, spans)
	}
	first := views(rcv.Take())
	checkFixtureSpans(t, id, evs, first)

	// Exporting again sends the same spans with the same ids.
	if _, _, err := otelexport.Export(ctx, exp, evs); err != nil {
		t.Fatal(err)
	}
	second := views(rcv.Take())
	if a, b := identity(first), identity(second); strings.Join(a, "\n") != strings.Join(b, "\n") {
		t.Errorf("second export differs:\n%s\n---\n%s", strings.Join(a, "\n"), strings.Join(b, "\n"))
	}

	// A turn still open is not exported: its spans would change.
	if _, spans, err := otelexport.Export(ctx, exp, evs[:len(evs)-4]); err != nil || spans != 6 {
		t.Errorf("with t2 open: %d spans, %v; want t1's 6", spans, err)
	}
}

// stack is a log store and a projector with a live exporter to endpoint.
func stack(t *testing.T, endpoint string, queue int, timeout time.Duration, reg *prometheus.Registry) (*logstore.Store, *projector.Service) {
	t.Helper()
	srv := natstest.RunServer(t)
	nc := natstest.Connect(t, srv)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	st, err := logstore.Open(ctx, nc, logstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	exp, err := otelexport.NewOTLPHTTP(ctx, endpoint, timeout)
	if err != nil {
		t.Fatal(err)
	}
	live, err := otelexport.NewLive(otelexport.LiveConfig{Exporter: exp, Store: st, Registerer: reg, QueueTurns: queue, Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	p, err := projector.New(projector.Config{Store: st, DataDir: t.TempDir(), Registerer: reg, Observer: live})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	pctx, pcancel := context.WithCancel(ctx)
	go func() { done <- p.Run(pctx) }()
	t.Cleanup(func() {
		pcancel()
		if err := <-done; err != nil {
			t.Errorf("projector: %v", err)
		}
	})
	natstest.CheckFor(t, 30*time.Second, 20*time.Millisecond, p.Ready)
	return st, p
}

func appendAll(t *testing.T, st *logstore.Store, evs []schema.Envelope) {
	t.Helper()
	ctx := context.Background()
	// One event at a time, as agents append.
	var last uint64
	for i := range evs {
		res, err := st.Append(ctx, logstore.AppendRequest{SessionID: evs[i].SessionID, ExpectedStreamSeq: last, Events: evs[i : i+1]})
		if err != nil {
			t.Fatal(err)
		}
		last = res.StreamSeq
	}
}

// The projector sends each turn as it ends, the same spans a later export
// sends.
func TestLiveExport(t *testing.T) {
	rcv := otlptest.NewReceiver(t)
	st, _ := stack(t, rcv.URL, 0, 5*time.Second, prometheus.NewRegistry())
	const id = "otel-live"
	evs := sessionfixture.Events(id)
	appendAll(t, st, evs)
	natstest.CheckFor(t, 30*time.Second, 20*time.Millisecond, func() error {
		if n := rcv.Count(); n != 9 {
			return fmt.Errorf("%d spans", n)
		}
		return nil
	})
	live := views(rcv.Take())
	checkFixtureSpans(t, id, evs, live)
	want := views(nil)
	for _, s := range otelexport.Build(evs) {
		sc := s.SpanContext()
		want[sc.SpanID().String()] = view{name: s.Name(), trace: sc.TraceID().String(), id: sc.SpanID().String(), parent: parentOf(s.Parent().SpanID().String())}
	}
	if a, b := identity(live), identity(want); strings.Join(a, "\n") != strings.Join(b, "\n") {
		t.Errorf("live spans differ from an export's:\n%s\n---\n%s", strings.Join(a, "\n"), strings.Join(b, "\n"))
	}
}

func parentOf(s string) string {
	if s == "0000000000000000" {
		return ""
	}
	return s
}

// A collector that never answers, or that is down (nothing listens), does
// not hold the projector back: it folds every session, and the turns the
// full queue cannot take are dropped and counted, as are those the
// collector did not take.
func TestLiveExportCollectorDown(t *testing.T) {
	stuck := make(chan struct{})
	hung := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-stuck:
		case <-r.Context().Done():
		}
	}))
	defer hung.Close()
	defer close(stuck)
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close()
	const n = 12
	for _, c := range []struct {
		name, url string
		timeout   time.Duration
	}{
		// Each export waits up to a minute for the collector: a projector
		// that waited for its exporter would fold nothing for minutes.
		{"hung", hung.URL, time.Minute},
		{"down", down.URL, time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			st, p := stack(t, c.url, 2, c.timeout, reg)
			for i := range n {
				appendAll(t, st, sessionfixture.Events(fmt.Sprintf("down-%d", i)))
			}
			srv := httptest.NewServer(p.Handler())
			defer srv.Close()
			natstest.CheckFor(t, 50*time.Second, 20*time.Millisecond, func() error {
				for i := range n {
					resp, err := http.Get(fmt.Sprintf("%s/v1/sessions/down-%d", srv.URL, i))
					if err != nil {
						return err
					}
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					if !bytes.Contains(b, []byte(`"lastSeq":41`)) {
						return fmt.Errorf("down-%d not folded: %s", i, b)
					}
				}
				return nil
			})
			if c.name == "hung" {
				// 2 turns a session: at most the queue and the one in
				// export were taken; the rest were dropped.
				if dropped := counter(t, reg, "sessionlog_otlp_turns_dropped_total", "queue_full"); dropped < 2*n-4 {
					t.Errorf("dropped %v turns, want at least %d", dropped, 2*n-4)
				}
				return
			}
			// Down: every turn is dropped, as export_failed once its
			// export gives up, or as queue_full while the queue is full.
			natstest.CheckFor(t, 30*time.Second, 20*time.Millisecond, func() error {
				full, failed := counter(t, reg, "sessionlog_otlp_turns_dropped_total", "queue_full"), counter(t, reg, "sessionlog_otlp_turns_dropped_total", "export_failed")
				if failed < 1 || full+failed != 2*n {
					return fmt.Errorf("dropped %v queue_full and %v export_failed, want %d in all", full, failed, 2*n)
				}
				return nil
			})
		})
	}
}

func counter(t *testing.T, reg *prometheus.Registry, name, reason string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.Metric {
			if reason == "" && len(m.Label) == 0 {
				return m.Counter.GetValue()
			}
			for _, l := range m.Label {
				if l.GetName() == "reason" && l.GetValue() == reason {
					return m.Counter.GetValue()
				}
			}
		}
	}
	return 0
}

// BenchmarkBuild: the spans of the fixture session (41 events, 2 turns,
// 9 spans), per event.
func BenchmarkBuild(b *testing.B) {
	evs := sessionfixture.Events("bench")
	b.ReportAllocs()
	for b.Loop() {
		if n := len(otelexport.Build(evs)); n != 9 {
			b.Fatal(n)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(evs)), "ns/event")
}

// A long session goes to the collector in requests of at most
// MaxExportSpans spans, every span sent once.
func TestExportLongSessionInParts(t *testing.T) {
	rcv := otlptest.NewReceiver(t)
	ctx := context.Background()
	exp, err := otelexport.NewOTLPHTTP(ctx, rcv.URL, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer exp.Shutdown(ctx)
	const id, turns = "otel-long", 300
	t0 := time.Date(2026, 12, 4, 9, 0, 0, 0, time.UTC)
	var evs []schema.Envelope
	add := func(typ, turn, attempt, data string) {
		n := uint64(len(evs) + 1)
		evs = append(evs, schema.Envelope{SchemaVersion: schema.Version, SessionID: id, Seq: n, EventID: fmt.Sprintf("e%d", n),
			Time: t0.Add(time.Duration(n) * time.Second), Type: typ, TurnID: turn, AttemptID: attempt, Data: []byte(data)})
	}
	add(schema.TypeSessionCreated, "", "", `{}`)
	for i := range turns {
		tid, aid := fmt.Sprintf("t%d", i), fmt.Sprintf("a%d", i)
		add(schema.TypeTurnStarted, tid, "", `{}`)
		add(schema.TypeAttemptStarted, tid, aid, `{}`)
		add(schema.TypeMessageAssistant, tid, aid, `{"content":"ok"}`)
		add(schema.TypeTurnEnded, tid, "", `{"reason":"completed"}`)
	}
	if err := sessionfixture.Check(evs); err != nil {
		t.Fatal(err)
	}
	n, spans, err := otelexport.Export(ctx, exp, evs)
	if err != nil || n != turns || spans != 2*turns {
		t.Fatalf("exported %d turns, %d spans, %v", n, spans, err)
	}
	sizes := rcv.Requests()
	total := 0
	for _, s := range sizes {
		if s > otelexport.MaxExportSpans {
			t.Errorf("a request of %d spans", s)
		}
		total += s
	}
	if len(sizes) < 2 || total != 2*turns || len(views(rcv.Take())) != 2*turns {
		t.Errorf("requests of %v spans, want %d spans in all in several", sizes, 2*turns)
	}
}

// A turn whose stored events changed after the projector folded them (a
// body replaced by another well-formed event of the same seq, which only
// the next event's SL-Prev shows) is read through the judge and not
// exported: it is dropped as unreadable, and the turn before it, which
// the change does not reach, is exported.
func TestLiveExportJudges(t *testing.T) {
	rcv := otlptest.NewReceiver(t)
	nc := natstest.Connect(t, natstest.RunServer(t))
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	st, err := logstore.Open(ctx, nc, logstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	const id = "otel-judged"
	evs := sessionfixture.Events(id)
	appendAll(t, st, evs)
	// The third event after the first turn's end changes: the judge
	// finds the break at the fourth, inside the second turn.
	var ends []int
	for i, e := range evs {
		if e.Type == schema.TypeTurnEnded {
			ends = append(ends, i)
		}
	}
	if len(ends) != 2 || ends[0]+3 >= ends[1] {
		t.Fatalf("the fixture's turns end at %v", ends)
	}
	end1 := ends[0]
	tamper.BreakChainAt(t, nc, logstore.StreamName, logstore.SubjectPrefix+id, tamper.BreakChange, end1+2)
	var ue *logstore.UnreadableError
	if err := st.FirstUnreadable(ctx, id); !errors.As(err, &ue) || ue.Kind != logstore.KindChanged {
		t.Fatalf("the judge finds %v, want a changed event", err)
	}

	exp, err := otelexport.NewOTLPHTTP(ctx, rcv.URL, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	live, err := otelexport.NewLive(otelexport.LiveConfig{Exporter: exp, Store: st, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	// What the projector saw before the change: every event, where it is
	// stored now.
	if _, err := st.ReadSession(ctx, id, 0, func(m *logstore.Msg) error {
		e, err := schema.Decode(m.Data)
		if err == nil {
			live.Observe(&e, m.StreamSeq)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- live.Run(ctx) }()
	natstest.CheckFor(t, 20*time.Second, 20*time.Millisecond, func() error {
		exported := counter(t, reg, "sessionlog_otlp_turns_exported_total", "")
		dropped := counter(t, reg, "sessionlog_otlp_turns_dropped_total", "unreadable")
		if exported+dropped < 2 {
			return fmt.Errorf("%v turns exported, %v dropped as unreadable", exported, dropped)
		}
		if exported != 1 || dropped != 1 {
			return fmt.Errorf("%v turns exported, %v dropped as unreadable; want 1 and 1", exported, dropped)
		}
		return nil
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
