package projector_test

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionlog/sessionlog/internal/gen"
	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/services/projector"
	"github.com/sessionlog/sessionlog/services/projector/httpapi"
	"github.com/sessionlog/sessionlog/services/projector/internal/projectortest"
)

// rawJS is the tests' superuser path to e's stream (raw messages the
// store would never build); the projector has none.
func rawJS(t *testing.T, e *projectortest.Env) jetstream.JetStream {
	t.Helper()
	js, err := jetstream.New(e.NC)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// publish stores events of a generated session straight in the stream.
func publishRaw(t *testing.T, e *projectortest.Env, id string, seq uint64, body []byte) {
	t.Helper()
	loc, _ := logstore.Locate(id)
	m := nats.NewMsg(loc.Subject)
	m.Data = body
	m.Header.Set(logstore.HeaderMsgID, id+":raw-"+strconv.FormatUint(seq, 10)+"-"+strconv.Itoa(len(body)))
	m.Header.Set(logstore.HeaderSeq, strconv.FormatUint(seq, 10))
	if _, err := rawJS(t, e).PublishMsg(e.Ctx, m); err != nil {
		t.Fatal(err)
	}
}

func TestSequenceDiscipline(t *testing.T) {
	e := projectortest.NewEnv(t)
	r := e.Start(t.TempDir())
	r.WaitReady(t)

	ok := gen.NewSession("ok", projectortest.T0)
	projectortest.PublishN(t, e, ok, 5)

	// The same seq stored twice with a different event id (the stream's
	// dedup lets it through) is not a duplicate but a forged event: the
	// session is unreadable after seq 4 (DESIGN.md section 4, issue 12).
	dup := gen.NewSession("dup", projectortest.T0)
	evs := projectortest.PublishN(t, e, dup, 4)
	again := evs[3]
	again.EventID = "other-id"
	again.Data = json.RawMessage(`{"content":"a different reply"}`)
	if _, err := gen.Publish(e.Ctx, e.LS, again); err != nil {
		t.Fatal(err)
	}
	projectortest.PublishN(t, e, dup, 2)

	// Duplicate: the same event stored twice (another message id, as a
	// retry after the dedup window would) is skipped; the first one counts.
	twice := gen.NewSession("twice", projectortest.T0)
	tevs := projectortest.PublishN(t, e, twice, 4)
	tb, _ := schema.Encode(&tevs[3])
	publishRaw(t, e, "twice", 4, tb)
	projectortest.PublishN(t, e, twice, 2)

	// Gap: seq 4 never stored, 5 follows 3.
	gap := gen.NewSession("gap", projectortest.T0)
	projectortest.PublishN(t, e, gap, 3)
	gap.Next() // seq 4 lost
	projectortest.PublishN(t, e, gap, 2)

	// Unknown required type at seq 4.
	unk := gen.NewSession("unk", projectortest.T0)
	projectortest.PublishN(t, e, unk, 3)
	u := unk.Next()
	u.Type, u.Data, u.Ignorable = "future/thing", json.RawMessage(`{}`), false
	gen.Publish(e.Ctx, e.LS, u)
	projectortest.PublishN(t, e, unk, 2)

	// An unknown ignorable type is folded past.
	ign := gen.NewSession("ign", projectortest.T0)
	projectortest.PublishN(t, e, ign, 3)
	g := ign.Next()
	g.Type, g.Data, g.Ignorable = "stats/tokens", json.RawMessage(`{"n":5}`), true
	gen.Publish(e.Ctx, e.LS, g)
	for seq := uint64(5); seq <= 6; seq++ {
		m := g
		m.Seq, m.EventID, m.Type, m.Ignorable, m.TurnID, m.AttemptID = seq, "ign-"+strconv.FormatUint(seq, 10), schema.TypeMessageUser, false, "t1", ""
		m.Data = json.RawMessage(`{"content":"after the ignorable"}`)
		gen.Publish(e.Ctx, e.LS, m)
	}

	// Newer schema version at seq 4.
	newer := gen.NewSession("newer", projectortest.T0)
	projectortest.PublishN(t, e, newer, 3)
	publishRaw(t, e, "newer", 4, []byte(`{"schemaVersion":2,"sessionId":"newer","seq":4,"eventId":"n4","time":"2026-12-01T10:00:00Z","type":"turn/started","turnId":"t9","data":{},"shape":"new"}`))
	projectortest.PublishN(t, e, newer, 1)

	// Not JSON at all.
	junk := gen.NewSession("junk", projectortest.T0)
	projectortest.PublishN(t, e, junk, 2)
	publishRaw(t, e, "junk", 3, []byte("\xff not json"))

	projectortest.PublishN(t, e, ok, 5)

	d := r.WaitSession(t, "ok", func(d httpapi.Detail) bool { return d.LastSeq == 10 })
	if d.Status == projector.StatusUnreadable || d.Status == projector.StatusGap || d.Problem != nil {
		t.Fatalf("ok: %s %+v", d.Status, d.Problem)
	}

	d = r.WaitSession(t, "dup", func(d httpapi.Detail) bool { return d.Status == projector.StatusUnreadable })
	if d.LastSeq != 4 || d.Problem.Seq != 5 || d.Problem.GotSeq != 4 {
		t.Fatalf("dup: lastSeq %d problem %+v", d.LastSeq, d.Problem)
	}
	d = r.WaitSession(t, "twice", func(d httpapi.Detail) bool { return d.LastSeq == 6 })
	if d.Problem != nil {
		t.Fatalf("twice: %+v", d.Problem)
	}
	var ev httpapi.Events
	r.GetJSON(t, "/v1/sessions/dup/events?after=3&limit=1", &ev)
	if len(ev.Events) != 1 || !json.Valid(ev.Events[0]) {
		t.Fatalf("dup events: %s", ev.Events)
	}
	if strings.Contains(string(ev.Events[0]), "a different reply") {
		t.Fatal("the forged event replaced the original event in the timeline")
	}
	if code, body := r.Get(t, "/v1/sessions/dup/context"); code != 409 || !strings.Contains(string(body), `"unreadable"`) {
		t.Fatalf("dup context: %d %s", code, body)
	}
	var c httpapi.Context
	r.GetJSON(t, "/v1/sessions/twice/context", &c)
	for _, en := range c.Entries {
		if en.Seq == 4 && string(en.Data) == `{"content":"a different reply"}` {
			t.Fatal("the duplicate replaced the original event in the context")
		}
	}

	d = r.WaitSession(t, "gap", func(d httpapi.Detail) bool { return d.Status == projector.StatusGap })
	if d.LastSeq != 3 || d.Problem == nil || d.Problem.Seq != 4 || d.Problem.GotSeq != 5 {
		t.Fatalf("gap: lastSeq %d problem %+v", d.LastSeq, d.Problem)
	}

	d = r.WaitSession(t, "unk", func(d httpapi.Detail) bool { return d.Status == projector.StatusUnreadable })
	if d.LastSeq != 3 || d.Problem.Seq != 4 || d.Problem.Code != string(schema.CodeUnreadable) {
		t.Fatalf("unknown type: lastSeq %d problem %+v", d.LastSeq, d.Problem)
	}
	// Its views are what seq 3 made of them: turn t1 open.
	if d.OpenTurn == nil || d.OpenTurn.ID != "t1" {
		t.Fatalf("unknown type: the views changed: %+v", d.OpenTurn)
	}

	d = r.WaitSession(t, "ign", func(d httpapi.Detail) bool { return d.LastSeq == 6 || d.Problem != nil })
	if d.Problem != nil {
		t.Fatalf("ignorable: %+v", d.Problem)
	}

	d = r.WaitSession(t, "newer", func(d httpapi.Detail) bool { return d.Status == projector.StatusUnreadable })
	if d.LastSeq != 3 || d.Problem.Seq != 4 {
		t.Fatalf("newer schema: lastSeq %d problem %+v", d.LastSeq, d.Problem)
	}
	d = r.WaitSession(t, "junk", func(d httpapi.Detail) bool { return d.Status == projector.StatusUnreadable })
	if d.LastSeq != 2 {
		t.Fatalf("junk: lastSeq %d", d.LastSeq)
	}
	// The unreadable event is still served from the log, marked.
	r.GetJSON(t, "/v1/sessions/junk/events?after=2", &ev)
	if len(ev.Events) != 1 {
		t.Fatalf("junk events: %s", ev.Events)
	}

	var list httpapi.List
	r.GetJSON(t, "/v1/sessions?status=unreadable", &list)
	if len(list.Sessions) != 4 {
		t.Fatalf("unreadable sessions: %d, want 4 (dup, unk, newer, junk)", len(list.Sessions))
	}
	r.GetJSON(t, "/v1/sessions?status=gap", &list)
	if len(list.Sessions) != 1 || list.Sessions[0].SessionID != "gap" {
		t.Fatalf("gap sessions: %+v", list.Sessions)
	}
	projectortest.CheckRebuild(t, e, r)

	// A restart resumes with the same verdicts.
	r.Stop(t)
	r2 := e.Start(r.DB().Dir())
	r2.WaitReady(t)
	if r2.Mode().Rebuild {
		t.Fatalf("restart rebuilt: %s", r2.Mode().Reason)
	}
	d = r2.WaitSession(t, "gap", func(d httpapi.Detail) bool { return true })
	if d.Status != projector.StatusGap {
		t.Fatalf("gap after restart: %s", d.Status)
	}
}

func TestContextAcrossCompactions(t *testing.T) {
	e := projectortest.NewEnv(t)
	r := e.Start(t.TempDir())
	r.WaitReady(t)
	st := e.LS
	seq := uint64(0)
	pub := func(typ string, data any, mod ...func(*schema.Envelope)) {
		t.Helper()
		seq++
		b, _ := json.Marshal(data)
		ev := schema.Envelope{SchemaVersion: 1, SessionID: "ctx", Seq: seq, EventID: "e" + strconv.FormatUint(seq, 10), Time: projectortest.T0.Add(time.Duration(seq) * time.Second), Type: typ, Data: b}
		for _, m := range mod {
			m(&ev)
		}
		if _, err := gen.Publish(e.Ctx, st, ev); err != nil {
			t.Fatal(err)
		}
	}
	user := func(text string) { pub(schema.TypeMessageUser, map[string]any{"content": text}) }
	pub(schema.TypeSessionCreated, map[string]any{"title": "ctx"})
	user("one")                                                                                             // 2
	user("two")                                                                                             // 3
	pub(schema.TypeCompactionStarted, map[string]any{"compactionId": "c1", "throughSeq": 3})                // 4
	user("three")                                                                                           // 5: arrives while compacting
	pub(schema.TypeCompactionEnded, map[string]any{"compactionId": "c1", "throughSeq": 3, "summary": "S1"}) // 6
	user("four")                                                                                            // 7
	pub(schema.TypeCompactionStarted, map[string]any{"compactionId": "c2", "throughSeq": 7})                // 8
	pub(schema.TypeCompactionAborted, map[string]any{"compactionId": "c2", "reason": "timeout"})            // 9
	user("five")                                                                                            // 10

	r.WaitSession(t, "ctx", func(d httpapi.Detail) bool { return d.LastSeq == 10 })
	var c httpapi.Context
	r.GetJSON(t, "/v1/sessions/ctx/context", &c)
	if c.Compaction == nil || c.Compaction.Summary != "S1" || c.Compaction.ThroughSeq != 3 {
		t.Fatalf("compaction: %+v", c.Compaction)
	}
	var got []string
	for _, en := range c.Entries {
		var m struct{ Content string }
		json.Unmarshal(en.Data, &m)
		got = append(got, m.Content)
	}
	// The aborted c2 changes nothing: S1 + everything after seq 3.
	if want := []string{"three", "four", "five"}; !equal(got, want) {
		t.Fatalf("context after S1 and aborted c2: %v, want %v", got, want)
	}

	pub(schema.TypeCompactionStarted, map[string]any{"compactionId": "c3", "throughSeq": 10})                // 11
	pub(schema.TypeCompactionEnded, map[string]any{"compactionId": "c3", "throughSeq": 10, "summary": "S3"}) // 12
	user("six")                                                                                              // 13
	r.WaitSession(t, "ctx", func(d httpapi.Detail) bool { return d.LastSeq == 13 })
	c = httpapi.Context{}
	r.GetJSON(t, "/v1/sessions/ctx/context", &c)
	if c.Compaction == nil || c.Compaction.Summary != "S3" || len(c.Entries) != 1 || c.Entries[0].Seq != 13 || c.Entries[0].Role != "user" {
		t.Fatalf("context after S3: %+v %+v", c.Compaction, c.Entries)
	}

	// A rewind drops what it abandoned; a compaction before its toSeq
	// still applies. A late title names the session.
	user("seven")                                                                   // 14
	user("eight")                                                                   // 15
	pub(schema.TypeContextRewound, map[string]any{"toEventId": "e14", "toSeq": 14}) // 16
	user("nine")                                                                    // 17
	pub(schema.TypeSessionTitled, map[string]any{"title": "ctx, renamed"})          // 18
	r.WaitSession(t, "ctx", func(d httpapi.Detail) bool { return d.LastSeq == 18 })
	contents := func() []string {
		c = httpapi.Context{}
		r.GetJSON(t, "/v1/sessions/ctx/context", &c)
		var out []string
		for _, en := range c.Entries {
			var m struct{ Content string }
			json.Unmarshal(en.Data, &m)
			out = append(out, m.Content)
		}
		return out
	}
	if got, want := contents(), []string{"six", "seven", "nine"}; !equal(got, want) || c.Compaction == nil || c.Compaction.Summary != "S3" {
		t.Fatalf("context after the rewind: %v, want %v after S3 (%+v)", got, want, c.Compaction)
	}
	pub(schema.TypeContextRewound, map[string]any{"toEventId": "e12", "toSeq": 12}) // 19
	user("ten")                                                                     // 20
	d := r.WaitSession(t, "ctx", func(d httpapi.Detail) bool { return d.LastSeq == 20 })
	if got, want := contents(), []string{"ten"}; !equal(got, want) || c.Compaction == nil || c.Compaction.Summary != "S3" {
		t.Fatalf("context after a rewind to the compaction: %v, want %v after S3", got, want)
	}
	if d.Title != "ctx, renamed" {
		t.Errorf("title %q, want the session/titled one", d.Title)
	}
	projectortest.CheckRebuild(t, e, r)
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestLineage: on three partitions the children (partitions 1 and 0) live in
// another stream than their parent (partition 2), on one node and on an R3
// cluster.
func TestLineage(t *testing.T) { natstest.ForEachLayout(t, testLineage) }

func testLineage(t *testing.T, l natstest.Layout) {
	e := projectortest.NewEnvLayout(t, l)
	r := e.Start(t.TempDir())
	r.WaitReady(t)
	parent := gen.NewSession("parent", projectortest.T0)
	projectortest.PublishN(t, e, parent, 12)
	for _, child := range []string{"child-b", "child-a"} {
		ev := schema.Envelope{SchemaVersion: 1, SessionID: child, Seq: 1, EventID: child + "-1", Time: projectortest.T0, Type: schema.TypeSessionCreated, Synthetic: true,
			Data: json.RawMessage(`{"parent":{"sessionId":"parent","seedLength":11,"depth":1}}`)}
		gen.Publish(e.Ctx, e.LS, ev)
	}
	d := r.WaitSession(t, "parent", func(d httpapi.Detail) bool { return len(d.Children) == 2 })
	if d.Children[0] != "child-a" || d.Children[1] != "child-b" {
		t.Fatalf("children: %v", d.Children)
	}
	c := r.WaitSession(t, "child-a", func(d httpapi.Detail) bool { return d.LastSeq == 1 })
	if c.Parent == nil || c.Parent.SessionID != "parent" || !c.Forking || c.Status != projector.StatusActive {
		t.Fatalf("child: parent %+v forking %v status %s", c.Parent, c.Forking, c.Status)
	}
}
