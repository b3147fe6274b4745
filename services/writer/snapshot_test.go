package writer_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/services/writer"
)

// newStoreEnv is an embedded server and a store, without a writer: each
// writer of a test runs alone (runWriter), as after a restart.
func newStoreEnv(t *testing.T) *env {
	t.Helper()
	e := &env{dir: t.TempDir()}
	e.srv = natstest.RunServerDir(t, e.dir)
	e.nc = natstest.Connect(t, e.srv)
	var err error
	if e.st, err = logstore.Open(context.Background(), e.nc, logstore.Config{}); err != nil {
		t.Fatal(err)
	}
	return e
}

// runWriter starts a writer with its own metrics and returns a stop that
// waits for it (and for the snapshots it is writing).
func runWriter(t *testing.T, st *logstore.Store, nc *nats.Conn, cfg writer.Config) (*prometheus.Registry, func()) {
	t.Helper()
	reg := prometheus.NewRegistry()
	cfg.Store, cfg.Conn, cfg.Registerer = st, nc, reg
	_, stop := runService(t, cfg)
	t.Cleanup(stop)
	return reg, stop
}

// longSession appends n events to sid in batches: turns of a tool call
// (requested, started, result), so that the state spends closed items.
// Event ids are e<seq>; the session's title is title.
func longSession(t *testing.T, nc *nats.Conn, sid, title string, n int) {
	t.Helper()
	var batch []map[string]any
	add := func(e map[string]any) {
		seq := len(batch) + 1
		e["eventId"] = fmt.Sprintf("e%d", seq)
		batch = append(batch, e)
	}
	add(ev(schema.TypeSessionCreated, "data", map[string]any{"title": title}))
	for turn := 1; len(batch) < n; turn++ {
		tid, call := fmt.Sprintf("t%d", turn), fmt.Sprintf("c%d", turn)
		for _, e := range []map[string]any{
			ev(schema.TypeTurnStarted, "turnId", tid),
			ev(schema.TypeToolRequested, "turnId", tid, "toolCallId", call, "data", map[string]any{"name": "sh", "input": map[string]any{"cmd": "ls"}}),
			ev(schema.TypeToolStarted, "turnId", tid, "toolCallId", call),
			ev(schema.TypeToolResult, "turnId", tid, "toolCallId", call, "data", map[string]any{"status": "ok"}),
			ev(schema.TypeTurnEnded, "turnId", tid, "data", map[string]any{"reason": "completed"}),
		} {
			add(e)
		}
	}
	batch = batch[:n]
	for i := 0; i < len(batch); i += schema.MaxBatchEvents {
		if r := appendReq(t, nc, map[string]any{"sessionId": sid, "events": batch[i:min(i+schema.MaxBatchEvents, len(batch))]}); r.err != nil {
			t.Fatalf("append of events %d..: %s: %s", i+1, r.err.Code, r.err.Message)
		}
	}
}

// snapshotted writes sessions of n events (ids and titles in pairs; "t"
// when none is given) with a writer that snapshots every so many events,
// stops it, and returns the first session's snapshot head.
func snapshotted(t *testing.T, e *env, every, n int, idTitles ...string) *logstore.SnapshotHead {
	t.Helper()
	if len(idTitles) == 1 {
		idTitles = append(idTitles, "t")
	}
	reg, stop := runWriter(t, e.st, e.nc, writer.Config{SnapshotEvery: every})
	for i := 0; i+1 < len(idTitles); i += 2 {
		longSession(t, e.nc, idTitles[i], idTitles[i+1], n)
	}
	stop()
	if got := counterSum(t, reg, "sessionlog_writer_snapshots_total", "result", "ok"); got < 1 {
		t.Fatalf("%v snapshots written", got)
	}
	head, err := e.st.SnapshotHeadOf(context.Background(), idTitles[0])
	if err != nil || head == nil {
		t.Fatalf("snapshot head %v, %v", head, err)
	}
	return head
}

// probes are requests whose answers depend on the whole session: retries
// of events stored before and after any snapshot, old ids with other
// content, reused turn and tool call ids, a wrong expectation. None
// stores anything.
func probes(sid string, n int) []map[string]any {
	req := func(es ...map[string]any) map[string]any { return map[string]any{"sessionId": sid, "events": es} }
	with := func(e map[string]any, kv ...any) map[string]any {
		for i := 0; i+1 < len(kv); i += 2 {
			e[kv[i].(string)] = kv[i+1]
		}
		return e
	}
	var ps []map[string]any
	for _, seq := range []int{2, 3, n/2 - 1, n - 3} {
		// Seq s is turn (s-2)/5+1's event (s-2)%5: 2 is turn/started.
		turn := (seq-2)/5 + 1
		tid := fmt.Sprintf("t%d", turn)
		var e map[string]any
		switch (seq - 2) % 5 {
		case 0:
			e = ev(schema.TypeTurnStarted, "turnId", tid)
		case 1:
			e = ev(schema.TypeToolRequested, "turnId", tid, "toolCallId", fmt.Sprintf("c%d", turn), "data", map[string]any{"name": "sh", "input": map[string]any{"cmd": "ls"}})
		case 2:
			e = ev(schema.TypeToolStarted, "turnId", tid, "toolCallId", fmt.Sprintf("c%d", turn))
		case 3:
			e = ev(schema.TypeToolResult, "turnId", tid, "toolCallId", fmt.Sprintf("c%d", turn), "data", map[string]any{"status": "ok"})
		default:
			e = ev(schema.TypeTurnEnded, "turnId", tid, "data", map[string]any{"reason": "completed"})
		}
		id := fmt.Sprintf("e%d", seq)
		ps = append(ps,
			req(with(e, "eventId", id)), // the stored event again: duplicate
			req(with(ev(schema.TypeTurnStarted, "turnId", "other"), "eventId", id)),                             // other content
			req(with(ev(schema.TypeTurnStarted, "turnId", "new"), "eventId", "new-id"), with(e, "eventId", id)), // new and stored
		)
	}
	ps = append(ps,
		req(with(ev(schema.TypeTurnStarted, "turnId", "t1"), "eventId", "x1")), // a used turn id
		req(with(ev(schema.TypeTurnStarted, "turnId", "fresh"), "eventId", "x2"), with(ev(schema.TypeToolRequested, "turnId", "fresh", "toolCallId", "c7", "data", map[string]any{"name": "sh", "input": map[string]any{}}), "eventId", "x3")), // a spent call id
		map[string]any{"sessionId": sid, "expectedSeq": n - 1, "events": []map[string]any{with(ev(schema.TypeTurnStarted, "turnId", "z"), "eventId", "x4")}},
	)
	return ps
}

func answers(t *testing.T, nc *nats.Conn, ps []map[string]any) [][]byte {
	t.Helper()
	var out [][]byte
	for _, p := range ps {
		out = append(out, appendReq(t, nc, p).raw)
	}
	return out
}

// A session of 30,121 events written with snapshots every 10,000: a
// writer started afterwards loads it from the last snapshot and reads only
// the events after it (sessionlog_writer_fold_events_total), and answers
// every probe (duplicates of events before and after the snapshot, reused
// ids, a conflict) and the next append byte for byte as a writer that
// folds the whole session.
func TestSnapshotLoadReadsOnlyTheEventsAfterIt(t *testing.T) {
	const n = 30_121 // whole turns: the next append starts one
	e := newStoreEnv(t)
	sid := "snap-long"
	head := snapshotted(t, e, 10_000, n, sid)
	if head.Seq < 20_000 || head.Seq > n || len(head.IDs) < 2 {
		t.Fatalf("snapshot at seq %d with %d id parts", head.Seq, len(head.IDs))
	}
	// Of the state parts only the head's is stored (each snapshot drops
	// the one before); every id part is.
	kv, err := natstest.JetStream(t, e.nc).Stream(context.Background(), "KV_"+logstore.SnapshotBucket)
	if err != nil {
		t.Fatal(err)
	}
	info, err := kv.Info(context.Background(), jetstream.WithSubjectFilter("$KV."+logstore.SnapshotBucket+"."+sid+".>"))
	if err != nil {
		t.Fatal(err)
	}
	var stateKeys []string
	for subj := range info.State.Subjects {
		if strings.HasPrefix(subj, "$KV."+logstore.SnapshotBucket+"."+sid+".s") {
			stateKeys = append(stateKeys, subj)
		}
	}
	if len(stateKeys) != head.State.Chunks || len(info.State.Subjects) != head.State.Chunks+len(head.IDs) {
		t.Fatalf("stored parts %v, want the head's state part (%d chunks) and %d id parts", info.State.Subjects, head.State.Chunks, len(head.IDs))
	}

	ps := probes(sid, n)
	reg, stop := runWriter(t, e.st, e.nc, writer.Config{SnapshotEvery: 10_000})
	got := answers(t, e.nc, ps)
	if f := counterSum(t, reg, "sessionlog_writer_fold_events_total"); f != float64(n-int(head.Seq)) {
		t.Fatalf("the load read %v events, want the %d after the snapshot", f, n-int(head.Seq))
	}
	if u := counterSum(t, reg, "sessionlog_writer_snapshot_loads_total", "result", "used"); u != 1 {
		t.Fatalf("snapshot used %v times", u)
	}
	stop()
	reg, stop = runWriter(t, e.st, e.nc, writer.Config{SnapshotEvery: -1})
	want := answers(t, e.nc, ps)
	if f := counterSum(t, reg, "sessionlog_writer_fold_events_total"); f != n {
		t.Fatalf("without snapshots the load read %v events, want %d", f, n)
	}
	stop()
	for i := range ps {
		if !bytes.Equal(got[i], want[i]) {
			t.Errorf("probe %d: with the snapshot %s\nwithout %s", i, got[i], want[i])
		}
	}
	// Duplicates were recognized as such on both sides (not appended).
	if r := decodeAnswer(t, got[0]); !r.Duplicate || r.LastSeq != 2 {
		t.Fatalf("retry of seq 2: %s", got[0])
	}
	_, stop = runWriter(t, e.st, e.nc, writer.Config{SnapshotEvery: 10_000})
	r := mustOK(t, e.nc, map[string]any{"sessionId": sid, "events": events(ev(schema.TypeTurnStarted, "turnId", "after", "eventId", "after-1"))})
	if r.LastSeq != n+1 {
		t.Fatalf("next append at seq %d, want %d", r.LastSeq, n+1)
	}
	stop()
}

func decodeAnswer(t *testing.T, b []byte) writer.AppendReply {
	t.Helper()
	var r writer.AppendReply
	if err := decodeJSON(b, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

// A snapshot that does not match the log (its last event's hash, or a
// stream seq holding another event) or whose state part is not the one
// its head names is ignored: the session is folded from its start and
// answers as before.
func TestSnapshotThatDisagreesWithTheLogIsIgnored(t *testing.T) {
	const n = 2_345
	e := newStoreEnv(t)
	ctx := context.Background()
	sid := "snap-bad"
	good := snapshotted(t, e, 1_000, n, sid)
	ps := probes(sid, n)
	_, stop := runWriter(t, e.st, e.nc, writer.Config{SnapshotEvery: -1})
	want := answers(t, e.nc, ps)
	stop()
	for name, bad := range map[string]func(h *logstore.SnapshotHead){
		"hash":      func(h *logstore.SnapshotHead) { h.Hash = logstore.ChainHash([]byte("another body")) },
		"streamSeq": func(h *logstore.SnapshotHead) { h.StreamSeq-- },
		"state":     func(h *logstore.SnapshotHead) { h.State.Sum++ },
		"ids":       func(h *logstore.SnapshotHead) { h.IDs = h.IDs[1:] },
	} {
		t.Run(name, func(t *testing.T) {
			h := *good
			h.IDs = append([]logstore.SnapshotPart(nil), good.IDs...)
			bad(&h)
			if err := e.st.PutSnapshotHead(ctx, sid, h); err != nil {
				t.Fatal(err)
			}
			reg, stop := runWriter(t, e.st, e.nc, writer.Config{SnapshotEvery: 1_000})
			got := answers(t, e.nc, ps)
			stop()
			for res, w := range map[string]float64{"ignored": 1, "used": 0} {
				if g := counterSum(t, reg, "sessionlog_writer_snapshot_loads_total", "result", res); g != w {
					t.Errorf("snapshot loads %s: %v, want %v", res, g, w)
				}
			}
			for i := range ps {
				if !bytes.Equal(got[i], want[i]) {
					t.Errorf("probe %d: %s\nwant %s", i, got[i], want[i])
				}
			}
		})
	}
}

// An erase's drop of the session's records (DropSessionRecords, the
// eraser's step) leaves no snapshot of it, and no byte of one in the
// bucket's files once the server has stopped: the session's title, held
// in every snapshot's state, is found there for a kept session and not
// for the erased one.
func TestErasedSessionLeavesNoSnapshot(t *testing.T) {
	e := newStoreEnv(t)
	ctx := context.Background()
	secret, kept := randomHex(t), randomHex(t)
	h := snapshotted(t, e, 300, 2_000, "snap-erased", secret, "snap-kept", kept)
	b, err := e.st.SnapshotPartOf(ctx, "snap-erased", h.State)
	if err != nil || !bytes.Contains(b, []byte(secret)) {
		t.Fatalf("the snapshot's state does not hold the title (%v)", err)
	}
	if err := e.st.DropSessionRecords(ctx, "snap-erased"); err != nil {
		t.Fatal(err)
	}
	if h, err := e.st.SnapshotHeadOf(ctx, "snap-erased"); h != nil || err != nil {
		t.Fatalf("snapshot head left: %+v %v", h, err)
	}
	if _, err := e.st.SnapshotPartOf(ctx, "snap-erased", h.State); !errors.Is(err, logstore.ErrSnapshotPart) {
		t.Fatalf("state part left: %v", err)
	}
	e.nc.Close()
	e.srv.Shutdown()
	e.srv.WaitForShutdown()
	// The bucket's files (the session's events, not erased here, hold the
	// title too).
	dir := filepath.Join(e.dir, "jetstream", "$G", "streams", "KV_"+logstore.SnapshotBucket)
	if hits := filesHolding(t, dir, []byte(secret)); len(hits) > 0 {
		t.Errorf("the erased session's title is still in %v", hits)
	}
	if hits := filesHolding(t, dir, []byte(kept)); len(hits) == 0 {
		t.Fatal("the kept session's title is in no file: the search proves nothing")
	}
}

func randomHex(t *testing.T) string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// filesHolding lists the files under dir that hold needle.
func filesHolding(t *testing.T, dir string, needle []byte) []string {
	t.Helper()
	var hits []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if bytes.Contains(b, needle) {
			hits = append(hits, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return hits
}
