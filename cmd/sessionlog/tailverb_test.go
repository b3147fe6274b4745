package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/pkg/api"
	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/pkg/session"
)

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// `sessionlog tail <id> --after N` prints the session's stored events
// after seq N, then new ones and transient ones as they come, and nothing
// of other sessions, until interrupted; on one stream and on three
// partitions, on one node and on an R3 cluster.
func TestTailAfterAndLive(t *testing.T) { natstest.ForEachLayout(t, testTailAfterAndLive) }

func testTailAfterAndLive(t *testing.T, l natstest.Layout) {
	d, nc, st := layoutStore(t, l)
	ctx := context.Background()
	now := time.Now().UTC()
	mk := func(sid string, seq uint64) schema.Envelope {
		typ, data := schema.TypeMessageUser, fmt.Sprintf(`{"content":"%s-%d"}`, sid, seq)
		if seq == 1 {
			typ, data = schema.TypeSessionCreated, `{}`
		}
		return schema.Envelope{SchemaVersion: schema.Version, SessionID: sid, Seq: seq, EventID: fmt.Sprintf("%s-%d", sid, seq), Time: now, Type: typ, Data: []byte(data)}
	}
	res, err := st.Append(ctx, logstore.AppendRequest{SessionID: "tl", Events: []schema.Envelope{mk("tl", 1), mk("tl", 2), mk("tl", 3)}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Append(ctx, logstore.AppendRequest{SessionID: "other", Events: []schema.Envelope{mk("other", 1)}}); err != nil {
		t.Fatal(err)
	}
	tctx, cancel := context.WithCancel(ctx)
	var out, errb syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- Main(tctx, []string{"tail", "tl", "--after", "1", "--nats-url", d.URL}, &out, &errb)
	}()
	wait := func(want ...string) {
		t.Helper()
		natstest.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
			got := out.String()
			for _, w := range want {
				if !strings.Contains(got, w) {
					return fmt.Errorf("no %q in %q (stderr %q)", w, got, errb.String())
				}
			}
			return nil
		})
	}
	wait(`"tl-2"`, `"tl-3"`)
	// The live subscription is made before the stored events are read:
	// a transient event sent now is printed.
	natstest.CheckFor(t, 10*time.Second, 50*time.Millisecond, func() error {
		if err := nc.Publish("sessions.live.tl", []byte(`{"afterSeq":3,"delta":"x"}`)); err != nil {
			return err
		}
		if !strings.Contains(out.String(), `"transient":true,"sessionId":"tl"`) {
			return fmt.Errorf("no transient line in %q", out.String())
		}
		return nil
	})
	if _, err := st.Append(ctx, logstore.AppendRequest{SessionID: "tl", ExpectedStreamSeq: res.StreamSeq, Events: []schema.Envelope{mk("tl", 4)}}); err != nil {
		t.Fatal(err)
	}
	wait(`"tl-4"`)
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errb.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("tail did not end when interrupted")
	}
	got := out.String()
	if strings.Contains(got, `"tl-1"`) || strings.Contains(got, "other") {
		t.Fatalf("tail printed seq 1 or another session: %q", got)
	}
	if i, j := strings.Index(got, `"tl-2"`), strings.Index(got, `"tl-3"`); i > j {
		t.Fatalf("out of order: %q", got)
	}
}

// `sessionlog tail` prints a transient event only if its publisher, as
// the Nats-Request-Info header names it, may write to the session: its
// owner, an agent its grants name (a grant tail follows counts at once),
// an operator. The test writes the header the server would add on the
// tenants' shared import (e2e/perms TestTenants runs it through the
// shipped configuration).
func TestTailLiveOnlyFromWriters(t *testing.T) {
	d, nc, st := layoutStore(t, natstest.Layout{Partitions: 1, Nodes: 1})
	ctx := context.Background()
	mk := func(seq uint64, typ, data string) schema.Envelope {
		return schema.Envelope{SchemaVersion: schema.Version, SessionID: "ow", Seq: seq, EventID: fmt.Sprintf("ow-%d", seq), Time: time.Now().UTC(), Type: typ, Data: []byte(data)}
	}
	res, err := st.Append(ctx, logstore.AppendRequest{SessionID: "ow", Events: []schema.Envelope{
		mk(1, schema.TypeSessionCreated, `{"owner":{"tenant":"AGENTS","agent":"alice"}}`)}})
	if err != nil {
		t.Fatal(err)
	}
	tctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var out, errb syncBuffer
	done := make(chan int, 1)
	go func() { done <- Main(tctx, []string{"tail", "ow", "--nats-url", d.URL}, &out, &errb) }()
	publish := func(agent, text string) error {
		m := nats.NewMsg("sessions.live.ow")
		m.Data = []byte(fmt.Sprintf(`{"afterSeq":1,"text":%q}`, text))
		if agent != "" {
			m.Header.Set(api.RequestInfoHeader, fmt.Sprintf(`{"acc":"AGENTS","user":%q}`, agent))
		}
		if err := nc.PublishMsg(m); err != nil {
			return err
		}
		return nc.Flush()
	}
	// until publishes the agent's events until one is printed (tail
	// subscribes after it starts), each after one of mallory's.
	until := func(agent, text string) {
		t.Helper()
		natstest.CheckFor(t, 10*time.Second, 50*time.Millisecond, func() error {
			if err := publish("mallory", "mallory-"+text); err != nil {
				return err
			}
			if err := publish(agent, text); err != nil {
				return err
			}
			if !strings.Contains(out.String(), `"`+text+`"`) {
				return fmt.Errorf("no %s in %q (stderr %q)", text, out.String(), errb.String())
			}
			return nil
		})
	}
	until("alice", "alice-1")
	until("", "operator-1")
	if strings.Contains(out.String(), "mallory") {
		t.Fatalf("tail printed mallory's events: %q", out.String())
	}
	if _, err := st.Append(ctx, logstore.AppendRequest{SessionID: "ow", ExpectedStreamSeq: res.StreamSeq, Events: []schema.Envelope{
		mk(2, schema.TypeSessionGranted, `{"grants":["mallory"]}`)}}); err != nil {
		t.Fatal(err)
	}
	natstest.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		if !strings.Contains(out.String(), `"ow-2"`) {
			return fmt.Errorf("the grant is not printed: %q", out.String())
		}
		return nil
	})
	until("mallory", "granted-1")
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if !strings.Contains(errb.String(), "transient events not shown: their publisher may not write to the session") {
		t.Fatalf("stderr %q does not count the events not shown", errb.String())
	}
}

// `sessionlog tail` judges what it prints as every reader does: a
// message stored around the writers whose SL-Prev shows the event before
// it changed (a well-formed event of the right seq otherwise) is reported
// with the judge's text and not printed; following every session, the
// others go on; following that session, tail ends with exit 1.
func TestTailJudges(t *testing.T) {
	d, nc, st := layoutStore(t, natstest.Layout{Partitions: 1, Nodes: 1})
	ctx := context.Background()
	mk := func(sid string, seq uint64) schema.Envelope {
		typ, data := schema.TypeMessageUser, fmt.Sprintf(`{"content":"%s-%d"}`, sid, seq)
		if seq == 1 {
			typ, data = schema.TypeSessionCreated, `{}`
		}
		return schema.Envelope{SchemaVersion: schema.Version, SessionID: sid, Seq: seq, EventID: fmt.Sprintf("%s-%d", sid, seq), Time: time.Now().UTC(), Type: typ, Data: []byte(data)}
	}
	appendOne := func(sid string, seq uint64) {
		t.Helper()
		tail, err := st.Tail(ctx, sid)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Append(ctx, logstore.AppendRequest{SessionID: sid, ExpectedStreamSeq: tail.StreamSeq, Events: []schema.Envelope{mk(sid, seq)}}); err != nil {
			t.Fatal(err)
		}
	}
	appendOne("good", 1)
	appendOne("bad", 1)
	appendOne("bad", 2)

	tctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var out, errb syncBuffer
	done := make(chan int, 1)
	go func() { done <- Main(tctx, []string{"tail", "--no-live", "--nats-url", d.URL}, &out, &errb) }()
	// Events of good until tail prints one: it follows from then on.
	seq := uint64(1)
	natstest.CheckFor(t, 10*time.Second, 50*time.Millisecond, func() error {
		seq++
		appendOne("good", seq)
		if !strings.Contains(out.String(), `"good-`) {
			return fmt.Errorf("nothing printed: %q (stderr %q)", out.String(), errb.String())
		}
		return nil
	})
	b, err := schema.Encode(ptr(mk("bad", 3)))
	if err != nil {
		t.Fatal(err)
	}
	m := nats.NewMsg(logstore.SubjectPrefix + "bad")
	m.Data = b
	m.Header.Set(logstore.HeaderMsgID, logstore.MsgID("bad", "bad-3"))
	m.Header.Set(logstore.HeaderType, schema.TypeMessageUser)
	m.Header.Set(logstore.HeaderSeq, "3")
	m.Header.Set(logstore.HeaderPrev, logstore.ChainHash([]byte("another body")))
	if _, err := natstest.JetStream(t, nc).PublishMsg(ctx, m); err != nil {
		t.Fatal(err)
	}
	verdict := st.FirstUnreadable(ctx, "bad")
	var ue *logstore.UnreadableError
	if !errors.As(verdict, &ue) || ue.Kind != logstore.KindChanged {
		t.Fatalf("the judge finds %v, want a changed event", verdict)
	}
	seq++
	appendOne("good", seq)
	natstest.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		if !strings.Contains(out.String(), fmt.Sprintf(`"good-%d"`, seq)) {
			return fmt.Errorf("good-%d not printed: %q", seq, out.String())
		}
		return nil
	})
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if strings.Contains(out.String(), `"bad-3"`) || !strings.Contains(errb.String(), verdict.Error()) {
		t.Fatalf("tail printed %q, said %q; want no bad-3 and %q", out.String(), errb.String(), verdict)
	}

	// Following the session alone, from after seq 1.
	var out1, errb1 syncBuffer
	code := Main(ctx, []string{"tail", "bad", "--after", "1", "--no-live", "--nats-url", d.URL}, &out1, &errb1)
	if code != 1 || !strings.Contains(errb1.String(), verdict.Error()) || !strings.Contains(out1.String(), `"bad-2"`) || strings.Contains(out1.String(), `"bad-3"`) {
		t.Fatalf("tail bad: exit %d, printed %q, said %q; want exit 1, bad-2 and the verdict", code, out1.String(), errb1.String())
	}
}

func ptr[T any](v T) *T { return &v }

// `sessionlog tail` starts a session it first meets partway from where it
// met it: the judge starts at the event stored before the first message
// it sees, so the session's earlier events are not read again. A session
// of about 2 MiB is met by tail (following every session) at one new
// event; what the server sent in the meantime, to tail and to the
// appends' acks, is far below the session's size (a read from its start
// sends it whole). The event tail prints is judged all the same: it is
// the session's next after the one stored before it.
func TestTailMeetsSessionsPartway(t *testing.T) {
	d, _, st := layoutStore(t, natstest.Layout{Partitions: 1, Nodes: 1})
	ctx := context.Background()
	const stored = 2000
	mk, last, _ := longSession(t, st, "long", `{}`, stored)
	seq := uint64(stored)
	sent, _, errb := tailSends(t, d, []string{"--no-live"}, func(out, errb string) error {
		seq++
		res, err := st.Append(ctx, logstore.AppendRequest{SessionID: "long", ExpectedStreamSeq: last, Events: []schema.Envelope{mk(seq)}})
		if err != nil {
			return err
		}
		last = res.StreamSeq
		if !strings.Contains(out, `"eventId":"long-`) {
			return fmt.Errorf("nothing printed: %q (stderr %q)", out, errb)
		}
		return nil
	})
	if errb != "" {
		t.Fatalf("tail said %q", errb)
	}
	if size := int64(stored * longPad); sent > size/8 {
		t.Fatalf("the server sent %d bytes while tail met the session: it read the session's %d bytes from its start", sent, size)
	}
	t.Logf("the server sent %d bytes while tail met the session at seq %d", sent, seq)
}

// `sessionlog tail <id> --after N` starts at the session's event N,
// found as the read API finds a page's lead, without reading the events
// before it: of a session of about 2 MiB, --after 1990 prints events
// 1991 to 2000, in order, while the server sends far less than the
// session; the events printed are judged against event N.
func TestTailAfterReadsFromThere(t *testing.T) {
	d, _, st := layoutStore(t, natstest.Layout{Partitions: 1, Nodes: 1})
	const stored = 2000
	longSession(t, st, "long", `{}`, stored)
	sent, out, errb := tailSends(t, d, []string{"long", "--after", "1990", "--no-live"}, func(out, errb string) error {
		if !strings.Contains(out, `"eventId":"long-2000"`) {
			return fmt.Errorf("long-2000 not printed: %q (stderr %q)", out, errb)
		}
		return nil
	})
	var got []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var e struct{ EventID string }
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("%q: %v", l, err)
		}
		got = append(got, e.EventID)
	}
	var want []string
	for seq := 1991; seq <= stored; seq++ {
		want = append(want, fmt.Sprintf("long-%d", seq))
	}
	if !slices.Equal(got, want) || errb != "" {
		t.Fatalf("tail --after 1990 printed %q, said %q; want %q", got, errb, want)
	}
	if size := int64(stored * longPad); sent > size/8 {
		t.Fatalf("the server sent %d bytes for tail --after 1990: it read the session's %d bytes from its start", sent, size)
	}
	t.Logf("the server sent %d bytes for tail --after 1990", sent)
}

// `sessionlog tail` judges an agent's transient event against the owner
// and grants it folds from the session's snapshot and the events after
// it, not from the session's start: a session of about 2 MiB with a
// snapshot at its last event, owned by alice, gets alice's event shown
// (and mallory's not) while the server sends far less than the session.
func TestTailLiveFoldsFromTheSnapshot(t *testing.T) {
	d, nc, st := layoutStore(t, natstest.Layout{Partitions: 1, Nodes: 1})
	ctx := context.Background()
	const stored = 2000
	_, last, state := longSession(t, st, "lv", `{"owner":{"tenant":"AGENTS","agent":"alice"}}`, stored)
	// The snapshot the writer would write at the session's last event.
	m, err := st.MsgAt(ctx, logstore.Streams()[0], last)
	if err != nil || m == nil {
		t.Fatalf("the last event: %v", err)
	}
	b, err := state.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	part, err := st.PutSnapshotPart(ctx, "lv", fmt.Sprintf("s%d", last), b)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.PutSnapshotHead(ctx, "lv", logstore.SnapshotHead{Seq: stored, StreamSeq: last, Hash: logstore.ChainHash(m.Data), State: part}); err != nil {
		t.Fatal(err)
	}
	if snap := logstore.SnapshotFor(ctx, st, "lv"); snap.Use != logstore.SnapshotUsed {
		t.Fatalf("the snapshot is not used: %v", snap.Why)
	}
	publish := func(agent, text string) error {
		m := nats.NewMsg("sessions.live.lv")
		m.Data = []byte(fmt.Sprintf(`{"afterSeq":%d,"text":%q}`, stored, text))
		m.Header.Set(api.RequestInfoHeader, fmt.Sprintf(`{"acc":"AGENTS","user":%q}`, agent))
		if err := nc.PublishMsg(m); err != nil {
			return err
		}
		return nc.Flush()
	}
	sent, out, _ := tailSends(t, d, []string{"lv"}, func(out, errb string) error {
		if err := publish("mallory", "mallory-1"); err != nil {
			return err
		}
		if err := publish("alice", "alice-1"); err != nil {
			return err
		}
		if !strings.Contains(out, `"alice-1"`) {
			return fmt.Errorf("no alice-1 in %q (stderr %q)", out, errb)
		}
		return nil
	})
	if strings.Contains(out, "mallory") {
		t.Fatalf("tail printed mallory's events: %q", out)
	}
	if size := int64(stored * longPad); sent > size/8 {
		t.Fatalf("the server sent %d bytes while tail judged alice's event: it read the session's %d bytes from its start", sent, size)
	}
	t.Logf("the server sent %d bytes while tail judged alice's event", sent)
}

// longPad is the bytes of padding in each event of longSession.
const longPad = 1024

// longSession stores session id with n events (seq 1 a session/created
// with data created, the others messages of longPad bytes and more) in
// batches of 200, and returns its event maker (seq -> envelope), the
// stream seq of its last event and its state folded.
func longSession(t *testing.T, st *logstore.Store, id, created string, n uint64) (func(uint64) schema.Envelope, uint64, *session.State) {
	t.Helper()
	pad := strings.Repeat("x", longPad)
	mk := func(seq uint64) schema.Envelope {
		typ, data := schema.TypeMessageUser, fmt.Sprintf(`{"content":"%s-%d %s"}`, id, seq, pad)
		if seq == 1 {
			typ, data = schema.TypeSessionCreated, created
		}
		return schema.Envelope{SchemaVersion: schema.Version, SessionID: id, Seq: seq, EventID: fmt.Sprintf("%s-%d", id, seq), Time: time.Now().UTC(), Type: typ, Data: []byte(data)}
	}
	state := session.New(id)
	var last uint64
	for seq := uint64(1); seq <= n; seq += 200 {
		evs := make([]schema.Envelope, 0, 200)
		for s := seq; s < seq+200 && s <= n; s++ {
			e := mk(s)
			if err := state.Apply(&e); err != nil {
				t.Fatal(err)
			}
			evs = append(evs, e)
		}
		res, err := st.Append(context.Background(), logstore.AppendRequest{SessionID: id, ExpectedStreamSeq: last, Events: evs})
		if err != nil {
			t.Fatal(err)
		}
		last = res.StreamSeq
	}
	return mk, last, state
}

// tailSends runs `sessionlog tail ARGS` until step, called again and
// again with what it printed so far, returns nil; then interrupts it
// (exit 0 required) and returns how many bytes the server sent its
// clients meanwhile, and what tail printed on stdout and stderr.
func tailSends(t *testing.T, d *natstest.Deployment, args []string, step func(out, errb string) error) (sent int64, out, errb string) {
	t.Helper()
	outBytes := func() int64 {
		v, err := d.Server.Varz(nil)
		if err != nil {
			t.Fatal(err)
		}
		return v.OutBytes
	}
	before := outBytes()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var o, e syncBuffer
	done := make(chan int, 1)
	go func() { done <- Main(ctx, append(append([]string{"tail"}, args...), "--nats-url", d.URL), &o, &e) }()
	natstest.CheckFor(t, 10*time.Second, 50*time.Millisecond, func() error { return step(o.String(), e.String()) })
	sent = outBytes() - before
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("exit %d: %s", code, e.String())
	}
	return sent, o.String(), e.String()
}
