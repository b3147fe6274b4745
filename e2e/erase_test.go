package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/pkg/api"
)

// markedEvents is a session of n turns whose title, goal, user text, tool
// input, tool output and compaction summary carry marker, and that the
// projector snapshots (more than its 64 events between snapshots): its
// summary and compaction views hold the marker too. 4 + 6n events.
func markedEvents(marker string, turns int) []map[string]any {
	evs := []map[string]any{
		{"eventId": "e0", "type": "session/created", "data": map[string]any{"title": "about " + marker}},
		{"eventId": "g1", "type": "goal/updated", "data": map[string]any{"revision": 1, "objective": "keep " + marker, "status": "active"}},
	}
	for i := 1; i <= turns; i++ {
		text, in, out := fmt.Sprintf("turn %d", i), fmt.Sprintf("ls %d", i), fmt.Sprintf("file%d", i)
		if i == 1 || i == turns {
			text, in, out = "my secret is "+marker, "grep "+marker, "found "+marker
		}
		tn, call := fmt.Sprintf("t%d", i), fmt.Sprintf("c%d", i)
		evs = append(evs,
			map[string]any{"eventId": fmt.Sprintf("e%d-1", i), "type": "turn/started", "turnId": tn},
			map[string]any{"eventId": fmt.Sprintf("e%d-2", i), "type": "message/user", "turnId": tn, "data": map[string]any{"content": text}},
			map[string]any{"eventId": fmt.Sprintf("e%d-3", i), "type": "tool/requested", "turnId": tn, "toolCallId": call, "data": map[string]any{"name": "sh", "input": map[string]any{"cmd": in}}},
			map[string]any{"eventId": fmt.Sprintf("e%d-4", i), "type": "tool/started", "turnId": tn, "toolCallId": call},
			map[string]any{"eventId": fmt.Sprintf("e%d-5", i), "type": "tool/result", "turnId": tn, "toolCallId": call, "data": map[string]any{"status": "ok", "output": out}},
			map[string]any{"eventId": fmt.Sprintf("e%d-6", i), "type": "turn/ended", "turnId": tn, "data": map[string]any{"reason": "completed"}},
		)
	}
	through := uint64(len(evs))
	return append(evs,
		map[string]any{"eventId": "k1", "type": "compaction/started", "data": map[string]any{"compactionId": "k1", "throughSeq": through}},
		map[string]any{"eventId": "k2", "type": "compaction/ended", "data": map[string]any{"compactionId": "k1", "throughSeq": through, "summary": "so far: " + marker}},
	)
}

// readAll reads a session through sessions.api.read: its stored bodies,
// or the error code.
func readAll(t *testing.T, nc *nats.Conn, id string) ([]json.RawMessage, string) {
	t.Helper()
	var out []json.RawMessage
	var after uint64
	for {
		b, _ := json.Marshal(api.ReadRequest{SessionID: id, AfterSeq: after})
		m, err := nc.Request(api.SubjectRead, b, 10*time.Second)
		if err != nil {
			t.Fatalf("read %s: %v", id, err)
		}
		var eb api.ErrorBody
		if json.Unmarshal(m.Data, &eb) == nil && eb.Error.Code != "" {
			return nil, string(eb.Error.Code)
		}
		var r api.ReadReply
		if err := json.Unmarshal(m.Data, &r); err != nil {
			t.Fatal(err)
		}
		out = append(out, r.Events...)
		if !r.More || len(r.Events) == 0 {
			return out, ""
		}
		after += uint64(len(r.Events))
	}
}

// filesHolding lists the files under dir whose bytes contain needle.
func filesHolding(t *testing.T, dir string, needle []byte) []string {
	t.Helper()
	var hits []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			return nil // deleted while the walk ran (a store at work)
		}
		if err != nil {
			return err
		}
		if bytes.Contains(b, needle) {
			rel, _ := filepath.Rel(dir, path)
			hits = append(hits, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return hits
}

func randomMarker(t *testing.T) string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

func apiCode(body string) string {
	var eb api.ErrorBody
	_ = json.Unmarshal([]byte(body), &eb)
	return string(eb.Error.Code)
}

// The guarantee of DESIGN.md section 14: a session erased (with a fork of
// it, by cascade) leaves no byte of its bodies in any file under the data
// directory once up has been restarted, though the projector had
// snapshotted it; every read answers not found or erased; verify is
// clean; the audit record's sha256 is that of the erased bodies. A kept
// session's marker is still found, so the search can fail.
func TestEraseLeavesNoByteOnDisk(t *testing.T) {
	t.Run("plain", func(t *testing.T) { eraseLeavesNoByte(t, false) })
	// Sealed bodies (docs/adr/011-sealed-bodies.md): the job destroys the
	// session's key and purges its subject; the key's bytes are in no
	// file after, and neither is the marker.
	t.Run("sealed", func(t *testing.T) { eraseLeavesNoByte(t, true) })
}

// The KV records of an erased session (ADR 009, "KV records"): a lease
// taken and renewed 20 times and then ended, a claim replaced and
// dropped, a fork record revised by its heartbeats and then dropped, with
// another session's lease and fork record written after them. The buckets keep one
// revision a key, and the server drops each replaced revision without an
// overwrite, so the erase's secure delete of the last revisions leaves the
// earlier ones in the block files. Under sealing (DESIGN.md section 2)
// every revision was ciphertext under the session's key, which the erase
// destroyed: no holder, workspace or key is in any file of the stopped
// server. Plain, the holders and the workspace are found there (what
// sealing changes; it also shows that the search finds them).
func TestEraseLeavesNoKVRecordOnDisk(t *testing.T) {
	t.Run("sealed", func(t *testing.T) { eraseLeavesNoKVRecord(t, true) })
	t.Run("plain", func(t *testing.T) { eraseLeavesNoKVRecord(t, false) })
}

func eraseLeavesNoKVRecord(t *testing.T, sealed bool) {
	dir := t.TempDir()
	srv := natstest.RunServerDir(t, dir)
	nc := natstest.Connect(t, srv)
	ctx := context.Background()
	st, err := logstore.Open(ctx, nc, logstore.Config{SealBodies: sealed})
	if err != nil {
		t.Fatal(err)
	}
	holder, claimer, workspace := "agent-"+randomMarker(t), "agent-"+randomMarker(t), "/work/"+randomMarker(t)
	id, child := "s-gone", "s-gone-fork"
	t0 := time.Now()
	// The lease: taken, renewed 20 times, ended (as the repairer ends a
	// lapsed one), taken by another holder, whose claim replaces the
	// first and is then dropped.
	for i := 0; i <= 20; i++ {
		must(t, st.RenewLease(ctx, id, holder, t0.Add(time.Duration(i)*time.Second)))
	}
	rec, err := st.LeaseRecord(ctx, id)
	must(t, err)
	must(t, st.EndLease(ctx, id, rec.Revision))
	must(t, st.RenewLease(ctx, id, claimer, t0.Add(time.Minute)))
	if l, _, err := st.GetLease(ctx, id); err != nil || l == nil || l.Holder != claimer {
		t.Fatalf("lease %+v %v", l, err)
	}
	claim, err := st.ClaimRevision(ctx, id)
	must(t, err)
	must(t, st.DropClaim(ctx, id, claim))
	// The fork record: made, revised by five heartbeats, dropped as a
	// copy that ended drops it.
	recs, err := st.OpenForkRecords(ctx)
	must(t, err)
	forkValue := func(i int) []byte {
		b, _ := json.Marshal(map[string]any{"childId": child, "parentId": id, "workspace": workspace, "heartbeatAt": t0.Add(time.Duration(i) * time.Second)})
		return b
	}
	must(t, recs.Create(ctx, child, forkValue(0)))
	for i := 1; i <= 5; i++ {
		r, ok, err := recs.Get(ctx, child)
		if err != nil || !ok || !bytes.Equal(r.Value, forkValue(i-1)) {
			t.Fatalf("fork record %q %v %v", r.Value, ok, err)
		}
		must(t, recs.Replace(ctx, child, forkValue(i), r.Revision))
	}
	must(t, recs.Drop(ctx, child))
	// Another session's lease and fork record, after them in the
	// buckets (a bucket whose every message is gone loses its block file).
	must(t, st.RenewLease(ctx, "s-other", "agent-"+randomMarker(t), t0))
	must(t, recs.Create(ctx, "s-other-fork", []byte(`{"childId":"s-other-fork","parentId":"s-other"}`)))
	keys := [][]byte{storedKey(t, nc, id), storedKey(t, nc, child)}
	otherKey := storedKey(t, nc, "s-other")
	if (keys[0] != nil && keys[1] != nil && otherKey != nil) != sealed {
		t.Fatalf("sealed %v: keys %x", sealed, keys)
	}
	// The erase's step for a session's records (the job's
	// DropSessionRecords, after the shred): the last revisions and the
	// data key, securely deleted.
	must(t, st.DropSessionRecords(ctx, id))
	must(t, st.DropSessionRecords(ctx, child))
	nc.Close()
	srv.Shutdown()
	srv.WaitForShutdown()

	erased := map[string]string{"the lease holder": holder, "the second holder": claimer, "the fork workspace": workspace}
	for what, needle := range erased {
		hits := filesHolding(t, dir, []byte(needle))
		if sealed && len(hits) > 0 {
			t.Errorf("%s is still in %v", what, hits)
		}
		if !sealed && len(hits) == 0 {
			t.Errorf("plain: %s is in no file (the server now overwrites replaced revisions: ADR 009's \"KV records\" and DESIGN.md section 14 say otherwise)", what)
		}
	}
	if !sealed {
		return
	}
	for i, k := range keys {
		if hits := filesHolding(t, dir, k); len(hits) > 0 {
			t.Errorf("erased key %d is still in %v", i, hits)
		}
	}
	// The search finds what stays: the other session's key.
	if hits := filesHolding(t, dir, otherKey); len(hits) == 0 {
		t.Errorf("the kept session's key is in no file")
	}
}

func eraseLeavesNoByte(t *testing.T, sealed bool) {
	dir := t.TempDir()
	// Said either way: the plain run is of plain bodies whatever the
	// default (its searches of the stream's files need them plain).
	args := []string{fmt.Sprintf("--seal-bodies=%v", sealed)}
	p := startUp(t, dir, nil, args...)
	nc := p.Connect(t)
	url := []string{"--nats-url", p.NATSURL}
	// 64 random characters: found nowhere else, and not compressible away
	// (a repeated pattern would not survive Pebble's block compression).
	marker, kept := randomMarker(t), randomMarker(t)
	// The lease's holder, and a transcript's project and session key (the
	// source index), are erased with their session too.
	holder, project, skey := "agent-"+randomMarker(t), "/home/"+randomMarker(t), "key."+randomMarker(t)[:40]
	mustAppend(t, nc, appendReq{SessionID: "s-secret", ExpectedSeq: u64(0), Holder: holder, Events: markedEvents(marker, 15)})
	srcReq, _ := json.Marshal(api.SourceAppendRequest{SourceKey: api.SourceKey{Format: "claude-code", ProjectKey: project, SessionKey: skey},
		Entries: []json.RawMessage{json.RawMessage(`{"type":"user","uuid":"e-1","sessionId":"` + skey + `","message":{"role":"user","content":"about ` + marker + `"}}`)}})
	sm, err := nc.Request(api.SubjectSourceAppend, srcReq, 30*time.Second)
	var srcRep api.SourceAppendReply
	if err != nil || json.Unmarshal(sm.Data, &srcRep) != nil || srcRep.SessionID == "" || srcRep.Appended == 0 {
		t.Fatalf("source append: %v %s", err, sm.Data)
	}
	mustAppend(t, nc, appendReq{SessionID: "s-kept", ExpectedSeq: u64(0), Events: markedEvents(kept, 2)})
	if out, errOut, code := cli(t, nil, nil, append([]string{"fork", "s-secret", "--child", "s-fork"}, url...)...); code != 0 {
		t.Fatalf("fork: exit %d\n%s\n%s", code, out, errOut)
	}
	// The projector has folded (and snapshotted) both sessions.
	natstest.CheckFor(t, 30*time.Second, 50*time.Millisecond, func() error {
		for _, id := range []string{"s-secret", "s-fork"} {
			code, body, err := httpGet(p.HTTPURL + "/v1/sessions/" + id)
			if err != nil || code != 200 || !strings.Contains(body, `"lastSeq":94`) && id == "s-secret" {
				return fmt.Errorf("%s: %d %s %v", id, code, body, err)
			}
		}
		return nil
	})
	bodies, code := readAll(t, nc, "s-secret")
	if code != "" || len(bodies) != 94 {
		t.Fatalf("read before erase: %d events, %s", len(bodies), code)
	}
	h := sha256.New()
	for _, b := range bodies {
		h.Write(b)
	}
	wantSum := hex.EncodeToString(h.Sum(nil))
	// The session's data key as stored (sealed) or none (plain), and
	// whether its stored bodies are sealed.
	key := storedKey(t, nc, "s-secret")
	last, err := nc.Request("$JS.API.STREAM.MSG.GET.SESSIONS", []byte(`{"last_by_subj":"sessions.ev.s-secret"}`), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var lm struct {
		Message struct {
			Hdrs []byte `json:"hdrs"`
			Data []byte `json:"data"`
		} `json:"message"`
	}
	if err := json.Unmarshal(last.Data, &lm); err != nil {
		t.Fatal(err)
	}
	if isSealed := strings.Contains(string(lm.Message.Hdrs), "SL-Seal: 1"); isSealed != sealed || (key != nil) != sealed ||
		bytes.Contains(lm.Message.Data, []byte(`"eventId"`)) == sealed {
		t.Fatalf("sealed %v: the last message's headers %q, key %x", sealed, lm.Message.Hdrs, key)
	}

	// A restart first: the projector's views are then in SSTables (the
	// replayed WAL is flushed on open), not only in its WAL and memtable.
	p.Stop()
	p = startUp(t, dir, nil, args...)
	nc = p.Connect(t)
	url = []string{"--nats-url", p.NATSURL}
	if hits := filesHolding(t, filepath.Join(dir, "projector"), []byte(marker)); len(hits) == 0 {
		t.Fatalf("the projector's files hold no marker before the erase")
	}
	// A watch open during the erase ends with it.
	resp, err := http.Get(p.HTTPURL + "/v1/sessions/s-secret/watch?after=94")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("watch: %v %v", resp, err)
	}
	watchEnded := make(chan struct{})
	go func() {
		defer close(watchEnded)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}()
	out, errOut, ec := cli(t, nil, nil, append([]string{"erase", "s-secret", "--reason", "privacy request", "--cascade", "--json"}, url...)...)
	if ec != 0 {
		t.Fatalf("erase: exit %d\n%s\n%s", ec, out, errOut)
	}
	var rep api.EraseReply
	if err := json.Unmarshal([]byte(out), &rep); err != nil || strings.Join(rep.Erased, ",") != "s-secret,s-fork" || rep.State != api.EraseDone {
		t.Fatalf("erase reply %q: %v", out, err)
	}
	if out, errOut, ec := cli(t, nil, nil, append([]string{"erase", srcRep.SessionID, "--reason", "privacy request"}, url...)...); ec != 0 {
		t.Fatalf("erase the transcript: exit %d\n%s\n%s", ec, out, errOut)
	}

	checkReads := func(p *upProc, nc *nats.Conn) {
		t.Helper()
		url := []string{"--nats-url", p.NATSURL}
		for _, id := range []string{"s-secret", "s-fork"} {
			if _, code := readAll(t, nc, id); code != "erased" {
				t.Errorf("sessions.api.read %s: %q, want erased", id, code)
			}
			r, err := request(nc, appendReq{SessionID: id, ExpectedSeq: u64(0), Events: []map[string]any{created("again")}}, 10*time.Second)
			if err != nil || r.Error == nil || r.Error.Code != "erased" {
				t.Errorf("create %s again: %+v %v, want erased", id, r.Error, err)
			}
			// An agent that goes on where it was (the writer may have the
			// session cached) is refused too.
			r, err = request(nc, appendReq{SessionID: id, ExpectedSeq: u64(94), Events: []map[string]any{userMsg("more", "more")}}, 10*time.Second)
			if err != nil || r.Error == nil || r.Error.Code != "erased" {
				t.Errorf("append to %s: %+v %v, want erased", id, r.Error, err)
			}
			r, err = request(nc, appendReq{SessionID: id, Events: []map[string]any{userMsg("more2", "more")}}, 10*time.Second)
			if err != nil || r.Error == nil || r.Error.Code != "erased" {
				t.Errorf("append to %s at its tail: %+v %v, want erased", id, r.Error, err)
			}
			for _, path := range []string{"", "/events", "/context", "/watch"} {
				code, body, err := httpGet(p.HTTPURL + "/v1/sessions/" + id + path)
				if err != nil || code != 404 || apiCode(body) != "erased" {
					t.Errorf("GET %s%s: %d %s %v, want 404 erased", id, path, code, body, err)
				}
			}
			for _, verb := range [][]string{{"show", id}, {"replay", id}, {"export", "--session", id}} {
				out, _, code := cli(t, nil, nil, append(verb, url...)...)
				if code == 0 || strings.Contains(out, marker) {
					t.Errorf("%v exited %d:\n%s", verb, code, out)
				}
			}
		}
		// The stream's NATS subjects hold nothing of them.
		for _, id := range []string{"s-secret", "s-fork"} {
			m, err := nc.Request("$JS.API.STREAM.MSG.GET.SESSIONS", []byte(`{"last_by_subj":"sessions.ev.`+id+`"}`), 5*time.Second)
			if err != nil || !strings.Contains(string(m.Data), `"err_code":10037`) {
				t.Errorf("msg get %s: %s %v, want no message", id, m.Data, err)
			}
		}
		natstest.CheckFor(t, 30*time.Second, 50*time.Millisecond, func() error {
			_, body, err := httpGet(p.HTTPURL + "/v1/sessions?limit=1000")
			if err != nil || strings.Contains(body, "s-secret") || strings.Contains(body, "s-fork") || !strings.Contains(body, "s-kept") {
				return fmt.Errorf("list: %s %v", body, err)
			}
			return nil
		})
		if out, errOut, code := cli(t, nil, nil, append([]string{"verify"}, url...)...); code != 0 || !strings.Contains(out, " 0 problems") {
			t.Errorf("verify: exit %d\n%s\n%s", code, out, errOut)
		}
		_, body, err := httpGet(p.HTTPURL + "/v1/audit")
		var page struct{ Records []api.AuditRecord }
		if err != nil || json.Unmarshal([]byte(body), &page) != nil || len(page.Records) != 3 {
			t.Fatalf("audit: %s %v", body, err)
		}
		var r api.AuditRecord
		for _, rec := range page.Records {
			if rec.SessionID == "s-secret" {
				r = rec
			}
		}
		if r.SessionID != "s-secret" || r.SHA256 != wantSum || r.Events != 94 || r.LastSeq != 94 || r.Reason != "privacy request" || strings.Contains(body, marker) {
			t.Errorf("audit %+v, want sha256 %s", r, wantSum)
		}
	}
	checkReads(p, nc)
	if k := storedKey(t, nc, "s-secret"); k != nil {
		t.Fatalf("the key of s-secret is still stored")
	}
	select {
	case <-watchEnded:
	case <-time.After(30 * time.Second):
		t.Fatal("the watch of the erased session is still open")
	}

	p.Stop()
	p2 := startUp(t, dir, nil, args...)
	checkReads(p2, p2.Connect(t))
	p2.Stop()

	// Every file under the data directory: the streams' and every KV
	// bucket's block files, Pebble's, the logs.
	for what, needle := range map[string]string{"the erased marker": marker, "the lease holder": holder,
		"the project key": project, "the session key": skey} {
		if hits := filesHolding(t, dir, []byte(needle)); len(hits) > 0 {
			t.Errorf("%s is still in %v", what, hits)
		}
	}
	if key != nil {
		if hits := filesHolding(t, dir, key); len(hits) > 0 {
			t.Errorf("the erased session's key is still in %v", hits)
		}
	}
	if hits := filesHolding(t, dir, []byte(kept)); len(hits) == 0 {
		t.Fatal("the kept session's marker is in no file: the search proves nothing")
	}
}

// storedKey is the session's data key in SESSION_KEYS (as its leader
// has it), nil when it has none.
func storedKey(t *testing.T, nc *nats.Conn, id string) []byte {
	t.Helper()
	m, err := nc.Request("$JS.API.STREAM.MSG.GET.KV_SESSION_KEYS", []byte(`{"last_by_subj":"$KV.SESSION_KEYS.`+id+`"}`), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		Message *struct {
			Data []byte `json:"data"`
		} `json:"message"`
	}
	if err := json.Unmarshal(m.Data, &r); err != nil {
		t.Fatal(err)
	}
	if r.Message == nil {
		return nil
	}
	return r.Message.Data
}

// closedEvents is markedEvents followed by session/closed.
func closedEvents(marker string, turns int) []map[string]any {
	return append(markedEvents(marker, turns), map[string]any{"eventId": "z", "type": "session/closed", "data": map[string]any{"reason": "done"}})
}

// Retention: up --retain-closed archives and erases a session closed for
// longer than the window and leaves an open one; the archive is what
// import takes back, under a new id (the old one is erased).
func TestRetentionArchivesErasesAndImportsBack(t *testing.T) {
	archive := t.TempDir()
	p := startUp(t, t.TempDir(), nil, "--retain-closed", "1s", "--archive-dir", archive)
	nc := p.Connect(t)
	url := []string{"--nats-url", p.NATSURL}
	marker := randomMarker(t)
	mustAppend(t, nc, appendReq{SessionID: "r-closed", ExpectedSeq: u64(0), Events: closedEvents(marker, 2)})
	mustAppend(t, nc, appendReq{SessionID: "r-open", ExpectedSeq: u64(0), Events: markedEvents(marker, 1)})
	before, _ := readAll(t, nc, "r-closed")
	file := filepath.Join(archive, "r-closed.jsonl.zst")
	natstest.CheckFor(t, 60*time.Second, 100*time.Millisecond, func() error {
		if _, err := os.Stat(file); err != nil {
			return err
		}
		if _, code := readAll(t, nc, "r-closed"); code != "erased" {
			return fmt.Errorf("r-closed: %q", code)
		}
		return nil
	})
	if evs, code := readAll(t, nc, "r-open"); code != "" || len(evs) != 10 {
		t.Fatalf("r-open: %d events, %q", len(evs), code)
	}
	if raw, _ := os.ReadFile(file); bytes.Contains(raw, []byte(marker)) {
		t.Fatal("the archive is not compressed")
	}
	// The old id is erased: import refuses it, and takes it under another.
	if out, errOut, code := cli(t, nil, nil, append([]string{"import", "--file", file}, url...)...); code == 0 || !strings.Contains(errOut, "erased") {
		t.Fatalf("import into the erased id: exit %d\n%s\n%s", code, out, errOut)
	}
	if out, errOut, code := cli(t, nil, nil, append([]string{"import", "--file", file, "--as", "r-back"}, url...)...); code != 0 || !strings.Contains(out, "imported 1 sessions, 17 events") {
		t.Fatalf("import --as: exit %d\n%s\n%s", code, out, errOut)
	}
	after, code := readAll(t, nc, "r-back")
	if code != "" || len(after) != len(before) {
		t.Fatalf("r-back: %d events (%q), want %d", len(after), code, len(before))
	}
	for i := range after {
		want := strings.Replace(string(before[i]), `"sessionId":"r-closed"`, `"sessionId":"r-back"`, 1)
		if string(after[i]) != want {
			t.Fatalf("event %d:\n%s\nwant\n%s", i+1, after[i], want)
		}
	}
}

// A real kill: up is SIGKILLed while it deletes a large session's events;
// the half-deleted session reads as erased (never as a shorter whole),
// and up, restarted, finishes the erase by itself (no request): nothing
// left, one audit record whose digest is that of the whole session.
//
// Plain bodies, whatever the default: the kill needs an erase that
// deletes event after event for seconds. A sealed session's job destroys
// its key and purges its subject in one request (its stored count goes
// from all to none, so there is no midway to kill it at): its job cut
// after each of its steps is services/eraser's
// TestEraseInterruptedAtEachStepFinishesByItself/sealed.
func TestEraseKilledMidwayFinishesByItself(t *testing.T) {
	dir := t.TempDir()
	plain := "--seal-bodies=false"
	p := startUp(t, dir, nil, plain)
	nc := p.Connect(t)
	marker := randomMarker(t)
	evs := markedEvents(marker, 160) // 964 events
	// 16 KiB of output per call (2.5 MiB in all): the server rewrites
	// the block file for each delete, so the erase takes seconds, longer
	// than the request waits before it answers accepted.
	pad := strings.Repeat(randomMarker(t), 256)
	for _, e := range evs {
		if e["type"] == "tool/result" {
			d := e["data"].(map[string]any)
			d["output"] = d["output"].(string) + pad
		}
	}
	for i := 0; i < len(evs); i += 40 {
		mustAppend(t, nc, appendReq{SessionID: "big", ExpectedSeq: u64(uint64(i)), Events: evs[i:min(i+40, len(evs))]})
	}
	bodies, _ := readAll(t, nc, "big")
	h := sha256.New()
	for _, b := range bodies {
		h.Write(b)
	}
	wantSum := hex.EncodeToString(h.Sum(nil))
	stored := func(nc *nats.Conn) int {
		m, err := nc.Request("$JS.API.STREAM.INFO.SESSIONS", []byte(`{"subjects_filter":"sessions.ev.big"}`), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		var info struct {
			State struct {
				Subjects map[string]int `json:"subjects"`
			} `json:"state"`
		}
		if err := json.Unmarshal(m.Data, &info); err != nil {
			t.Fatal(err)
		}
		return info.State.Subjects["sessions.ev.big"]
	}
	// The erase is accepted at once and goes on in up; up dies under it.
	out, errOut, code := cli(t, nil, nil, "erase", "big", "--reason", "kill test", "--wait=false", "--json", "--nats-url", p.NATSURL)
	var rep api.EraseReply
	if code != 0 || json.Unmarshal([]byte(out), &rep) != nil || rep.State != api.EraseAccepted || len(rep.Jobs) != 1 {
		t.Fatalf("erase: exit %d\n%s\n%s", code, out, errOut)
	}
	natstest.CheckFor(t, 60*time.Second, time.Millisecond, func() error {
		if n := stored(nc); n == len(evs) || n == 0 {
			return fmt.Errorf("%d stored", n)
		}
		return nil
	})
	p.Kill()

	p = startUp(t, dir, nil, plain)
	nc = p.Connect(t)
	if _, code := readAll(t, nc, "big"); code != "erased" {
		t.Fatalf("a half-erased session reads %q, want erased", code)
	}
	// While it runs, verify names it as an erasure under way, not a gap.
	if out, _, _ := cli(t, nil, nil, "verify", "--nats-url", p.NATSURL); stored(nc) > 0 && strings.Contains(out, "gap") {
		t.Errorf("verify calls the unfinished erasure a gap:\n%s", out)
	}
	natstest.CheckFor(t, 5*time.Minute, 100*time.Millisecond, func() error {
		_, body, err := httpGet(p.HTTPURL + "/v1/audit")
		var page struct{ Records []api.AuditRecord }
		if err != nil || json.Unmarshal([]byte(body), &page) != nil || len(page.Records) != 1 {
			return fmt.Errorf("audit %s %v", body, err)
		}
		if r := page.Records[0]; r.SHA256 != wantSum || r.Events != uint64(len(evs)) {
			t.Fatalf("audit %+v, want %s over %d events", r, wantSum, len(evs))
		}
		return nil
	})
	if n := stored(nc); n != 0 {
		t.Fatalf("%d events left", n)
	}
	// The same request now answers done, from the record.
	out, errOut, code = cli(t, nil, nil, "erase", "big", "--reason", "kill test", "--nats-url", p.NATSURL)
	if code != 0 || !strings.Contains(out, "erased big (964 events)") {
		t.Fatalf("repeat: exit %d\n%s\n%s", code, out, errOut)
	}
	if out, errOut, code := cli(t, nil, nil, "verify", "--nats-url", p.NATSURL); code != 0 {
		t.Fatalf("verify: exit %d\n%s\n%s", code, out, errOut)
	}
	p.Stop()
	if hits := filesHolding(t, dir, []byte(marker)); len(hits) > 0 {
		t.Fatalf("the marker is still in %v", hits)
	}
}
