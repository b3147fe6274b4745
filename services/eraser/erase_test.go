package eraser

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/pkg/api"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// eraseOwner is the owner and grants of eraseSession's sessions.
const eraseOwner = `"owner":{"tenant":"AGENTS","agent":"alice"},"grants":["bob"]`

// eraseSession writes a short closed session holding marker in user text,
// tool input and tool output, and returns the sha256 of its bodies.
func (e *env) eraseSession(id, marker string, parent string) string {
	e.t.Helper()
	created := `{"type":"session/created","data":{` + eraseOwner + `}}`
	if parent != "" {
		created = fmt.Sprintf(`{"type":"session/created","data":{`+eraseOwner+`,"parent":{"sessionId":%q,"seedLength":1,"depth":1}}}`, parent)
	}
	e.appendEvents(id,
		created,
		`{"type":"turn/started","turnId":"t1"}`,
		fmt.Sprintf(`{"type":"message/user","turnId":"t1","data":{"content":"user says %s"}}`, marker),
		fmt.Sprintf(`{"type":"tool/requested","turnId":"t1","toolCallId":"c1","data":{"name":"sh","input":{"cmd":"echo %s"}}}`, marker),
		`{"type":"tool/started","turnId":"t1","toolCallId":"c1"}`,
		fmt.Sprintf(`{"type":"tool/result","turnId":"t1","toolCallId":"c1","data":{"status":"ok","output":"printed %s"}}`, marker),
		`{"type":"turn/ended","turnId":"t1","data":{"reason":"completed"}}`,
		`{"type":"session/closed","data":{"reason":"done"}}`,
	)
	h := sha256.New()
	if _, err := e.store.ReadSession(context.Background(), id, 0, func(m *logstore.Msg) error {
		h.Write(m.Data)
		return nil
	}); err != nil {
		e.t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func (e *env) erase(body string) (api.EraseReply, string) {
	e.t.Helper()
	m, err := e.nc.Request(api.SubjectErase, []byte(body), 30*time.Second)
	if err != nil {
		e.t.Fatalf("erase %s: %v", body, err)
	}
	var eb api.ErrorBody
	if json.Unmarshal(m.Data, &eb) == nil && eb.Error.Code != "" {
		return api.EraseReply{}, string(eb.Error.Code)
	}
	var out api.EraseReply
	if err := json.Unmarshal(m.Data, &out); err != nil {
		e.t.Fatalf("reply %s: %v", m.Data, err)
	}
	return out, ""
}

// audits returns the audit records of the stream.
func (e *env) audits() []api.AuditRecord {
	e.t.Helper()
	recs, _, err := e.store.AuditRecords(context.Background(), 0, 1000)
	if err != nil {
		e.t.Fatal(err)
	}
	return recs
}

// gone checks that nothing of the session is left but its erasure record.
func (e *env) gone(id string) {
	e.t.Helper()
	ctx := context.Background()
	if m, err := e.store.NextAfter(ctx, id, 0); err != nil || m != nil {
		e.t.Fatalf("%s: a message is left (%v, %v)", id, m, err)
	}
	if l, _, err := e.store.GetLease(ctx, id); err != nil || l != nil {
		e.t.Fatalf("%s: lease left: %+v %v", id, l, err)
	}
	if c, err := e.store.GetClaim(ctx, id); err != nil || c != nil {
		e.t.Fatalf("%s: claim left: %+v %v", id, c, err)
	}
	rec, _, err := e.store.ErasureOf(ctx, id)
	if err != nil || rec == nil || !rec.Done {
		e.t.Fatalf("%s: erasure record %+v, %v", id, rec, err)
	}
}

func TestEraseRemovesEventsRecordsAndAuditsOnce(t *testing.T) {
	e := newEnv(t)
	e.start(Config{})
	marker := strings.Repeat("M", 64)
	sum := e.eraseSession("s-erase", marker, "")
	e.claim("s-erase", "agent-1")
	e.appendEvents("s-other", `{"type":"session/created"}`)

	got, code := e.erase(`{"sessionId":"s-erase","reason":"privacy request","by":"ops"}`)
	if code != "" {
		t.Fatalf("erase: %s", code)
	}
	if got.SessionID != "s-erase" || len(got.Erased) != 1 || got.Erased[0] != "s-erase" || got.Events != 8 {
		t.Fatalf("reply %+v", got)
	}
	e.gone("s-erase")
	recs := e.audits()
	if len(recs) != 1 {
		t.Fatalf("%d audit records, want 1", len(recs))
	}
	r := recs[0]
	if r.SessionID != "s-erase" || r.SHA256 != sum || r.Events != 8 || r.LastSeq != 8 || r.By != "ops" || r.Reason != "privacy request" || r.ErasedAt == "" {
		t.Fatalf("audit %+v, want sha256 %s", r, sum)
	}
	// Repeating it changes nothing and writes no second record.
	if got, code := e.erase(`{"sessionId":"s-erase","reason":"again","by":"ops"}`); code != "" || got.Events != 8 {
		t.Fatalf("repeat: %+v %s", got, code)
	}
	if n := len(e.audits()); n != 1 {
		t.Fatalf("%d audit records after a repeat, want 1", n)
	}
	// Other sessions are untouched.
	if m, err := e.store.NextAfter(context.Background(), "s-other", 0); err != nil || m == nil {
		t.Fatalf("s-other lost: %v", err)
	}
}

func TestEraseErrors(t *testing.T) {
	e := newEnv(t)
	e.start(Config{})
	for name, tc := range map[string]struct{ body, code string }{
		"bad_request json":      {`{`, "bad_request"},
		"bad_request id":        {`{"sessionId":"a.b","reason":"r","by":"b"}`, "bad_request"},
		"bad_request no reason": {`{"sessionId":"s-1","by":"b"}`, "bad_request"},
		"bad_request no by":     {`{"sessionId":"s-1","reason":"r"}`, "bad_request"},
		"not_found":             {`{"sessionId":"s-none","reason":"r","by":"b"}`, "not_found"},
	} {
		t.Run(name, func(t *testing.T) {
			if _, code := e.erase(tc.body); code != tc.code {
				t.Fatalf("code %q, want %q", code, tc.code)
			}
		})
	}
	if n := len(e.audits()); n != 0 {
		t.Fatalf("%d audit records after refused erases", n)
	}
}

// Forks: without cascade a child keeps its copy; with it every
// descendant goes, even when the erase is repeated after the parent is
// gone.
func TestEraseCascade(t *testing.T) {
	e := newEnv(t)
	e.start(Config{})
	marker := strings.Repeat("C", 64)
	e.eraseSession("p", marker, "")
	e.eraseSession("c1", marker, "p")
	e.eraseSession("c2", marker, "c1")
	e.eraseSession("k", marker, "q") // another family

	if got, code := e.erase(`{"sessionId":"p","reason":"r","by":"b"}`); code != "" || len(got.Erased) != 1 {
		t.Fatalf("erase p: %+v %s", got, code)
	}
	if m, _ := e.store.NextAfter(context.Background(), "c1", 0); m == nil {
		t.Fatal("c1 erased without cascade")
	}
	got, code := e.erase(`{"sessionId":"p","reason":"r","by":"b","cascade":true}`)
	if code != "" {
		t.Fatalf("cascade: %s", code)
	}
	if strings.Join(got.Erased, ",") != "p,c1,c2" || got.Events != 24 {
		t.Fatalf("cascade erased %v (%d events), want p,c1,c2 (24)", got.Erased, got.Events)
	}
	for _, id := range []string{"p", "c1", "c2"} {
		e.gone(id)
	}
	if m, _ := e.store.NextAfter(context.Background(), "k", 0); m == nil {
		t.Fatal("k erased")
	}
	if n := len(e.audits()); n != 3 {
		t.Fatalf("%d audit records, want 3", n)
	}
}

// An erase stopped after any step (as a kill of the repairer would stop
// it) is finished by itself: a repairer started afterwards resumes the
// job from its record, with no request; nothing is left, and there is one
// audit record with the digest of the whole session. Alike for a session
// whose bodies are sealed, whose job has fewer steps: it securely deletes
// only the seal's two events and the key (docs/adr/011-sealed-bodies.md),
// where a plain session's deletes each of its 8 events; it is cut at each
// of its three deletes, and its key is gone after.
func TestEraseInterruptedAtEachStepFinishesByItself(t *testing.T) {
	natstest.ForEachSealing(t, testEraseInterruptedAtEachStep)
}

func testEraseInterruptedAtEachStep(t *testing.T, sealed bool) {
	type step struct {
		step string
		nth  int // stop at the nth time the step is reached
	}
	steps := []step{{StepMarked, 1}, {StepHashed, 1}, {StepDeleted, 1}, {StepDeleted, 5}, {StepDeleted, 8}, {StepRecords, 1}, {StepAudited, 1}}
	if sealed {
		steps = []step{{StepMarked, 1}, {StepHashed, 1}, {StepDeleted, 1}, {StepDeleted, 2}, {StepDeleted, 3}, {StepRecords, 1}, {StepAudited, 1}}
	}
	for _, tc := range steps {
		t.Run(fmt.Sprintf("%s-%d", tc.step, tc.nth), func(t *testing.T) {
			e := newEnvWith(t, logstore.Config{SealBodies: sealed})
			r := e.start(Config{})
			sum := e.eraseSession("s-1", strings.Repeat("K", 64), "")
			if got := e.storedSealed("s-1"); got != sealed {
				t.Fatalf("stored sealed %v, want %v", got, sealed)
			}
			// No claim: a sweep listing the claims while the job deletes one
			// waits out its fetch (5 s).
			n := 0
			errKilled := errors.New("killed")
			hook := func(step string) error {
				if step == tc.step {
					n++
					if n == tc.nth {
						return errKilled
					}
				}
				return nil
			}
			r.svc.eraseStep.Store(&hook)
			got, code := e.erase(`{"sessionId":"s-1","reason":"r","by":"b"}`)
			if tc.step == StepMarked {
				if code != string(schema.CodeNotCommitted) {
					t.Fatalf("erase stopped at its record answered %q, want not_committed", code)
				}
			} else if code != "" || got.State != EraseAccepted || len(got.Jobs) != 1 || got.Jobs[0].Done {
				t.Fatalf("interrupted erase answered %+v %q, want accepted and not done", got, code)
			}
			rec, _, _ := e.store.ErasureOf(context.Background(), "s-1")
			if rec == nil || rec.Done {
				t.Fatalf("record after the interruption: %+v", rec)
			}
			r.stop()
			e.start(Config{})
			e.waitErased("s-1")
			e.gone("s-1")
			if sealed {
				e.keyGone("s-1")
			}
			recs := e.audits()
			if len(recs) != 1 || recs[0].SHA256 != sum || recs[0].Events != 8 || recs[0].LastSeq != 8 ||
				recs[0].Owner == nil || *recs[0].Owner != (schema.Owner{Tenant: "AGENTS", Agent: "alice"}) || !slices.Equal(recs[0].Grants, []string{"bob"}) {
				t.Fatalf("audit %+v, want one with sha256 %s, owner AGENTS/alice and grants [bob]", recs, sum)
			}
		})
	}
}

// waitErased waits until the session's erasure record says done.
func (e *env) waitErased(id string) {
	e.t.Helper()
	natstest.CheckFor(e.t, 30*time.Second, 20*time.Millisecond, func() error {
		rec, _, err := e.store.ErasureOf(context.Background(), id)
		if err != nil || rec == nil || !rec.Done {
			return fmt.Errorf("%s: %+v %v", id, rec, err)
		}
		return nil
	})
}

// Retention: sessions closed longer than the window are archived and
// erased, others (closed recently, or open) are left; the archive holds
// the session's events as export writes them.
func TestRetentionArchivesAndErases(t *testing.T) {
	e := newEnv(t)
	marker := strings.Repeat("R", 64)
	e.eraseSession("old", marker, "")
	e.appendEvents("open", `{"type":"session/created"}`, `{"type":"turn/started","turnId":"t1"}`)
	dir := t.TempDir()
	later := time.Now().Add(2 * time.Hour)
	r := e.start(Config{SweepInterval: -1, ArchiveDir: dir,
		Now: func() time.Time { return later }})
	// Closed after the clock's window: kept.
	e.eraseSession("recent", marker, "")
	r.svc.cfg.RetainClosed = time.Hour
	n, err := r.svc.Retain(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// "recent" was closed within the (fake) hour too: the clock is 2h
	// ahead of both, so only a window longer than that keeps it.
	if n != 2 {
		t.Fatalf("retention erased %d sessions, want 2 (old, recent)", n)
	}
	if m, _ := e.store.NextAfter(context.Background(), "open", 0); m == nil {
		t.Fatal("an open session was erased")
	}
	if seqs := archived(t, dir, "old"); !slices.Equal(seqs, []uint64{1, 2, 3, 4, 5, 6, 7, 8}) {
		t.Fatalf("archive holds seqs %v, want 1 to 8", seqs)
	}
	for _, a := range e.audits() {
		if a.By != RetentionBy {
			t.Fatalf("audit by %q", a.By)
		}
	}
}

// A window longer than the sessions' age keeps them.
func TestRetentionKeepsSessionsInsideTheWindow(t *testing.T) {
	e := newEnv(t)
	e.eraseSession("young", strings.Repeat("Y", 64), "")
	r := e.start(Config{SweepInterval: -1})
	r.svc.cfg.RetainClosed = time.Hour
	if n, err := r.svc.Retain(context.Background()); err != nil || n != 0 {
		t.Fatalf("erased %d, %v", n, err)
	}
	if m, _ := e.store.NextAfter(context.Background(), "young", 0); m == nil {
		t.Fatal("young erased")
	}
}

// Appends that land while the job deletes (they were past the writer's
// check of the record already) are deleted too, and the audit's count,
// last seq and digest cover exactly the events deleted, those included.
func TestEraseAuditCoversAppendsDuringTheErase(t *testing.T) {
	e := newEnv(t)
	r := e.start(Config{})
	e.eraseSession("s-live", strings.Repeat("L", 64), "")
	ctx := context.Background()
	var bodies [][]byte
	tail, err := e.store.ReadSession(ctx, "s-live", 0, func(m *logstore.Msg) error {
		bodies = append(bodies, m.Data)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var appendErr error
	appended := false
	hook := func(step string) error {
		if step != StepDeleted || appended {
			return nil
		}
		appended = true
		if _, appendErr = e.tryAppend("s-live", `{"type":"turn/started","turnId":"t2"}`,
			`{"type":"message/user","turnId":"t2","data":{"content":"late"}}`, `{"type":"turn/ended","turnId":"t2","data":{"reason":"completed"}}`); appendErr != nil {
			return nil
		}
		_, appendErr = e.store.ReadSession(ctx, "s-live", tail.StreamSeq, func(m *logstore.Msg) error {
			bodies = append(bodies, m.Data)
			return nil
		})
		return nil
	}
	r.svc.eraseStep.Store(&hook)
	got, err := r.svc.Erase(ctx, EraseRequest{SessionID: "s-live", Reason: "r", By: "b"})
	if err != nil || appendErr != nil || !appended {
		t.Fatalf("erase: %+v %v (append: %v, %v)", got, err, appended, appendErr)
	}
	h := sha256.New()
	for _, b := range bodies {
		h.Write(b)
	}
	e.gone("s-live")
	recs := e.audits()
	if len(bodies) != 11 || len(recs) != 1 || recs[0].Events != 11 || recs[0].LastSeq != 11 || recs[0].SHA256 != hex.EncodeToString(h.Sum(nil)) {
		t.Fatalf("audit %+v over %d bodies, want 11 events and their digest", recs, len(bodies))
	}
	if got.State != EraseDone || got.Events != 11 || len(got.Jobs) != 1 || got.Jobs[0].Deleted != 11 {
		t.Fatalf("reply %+v", got)
	}
}

// A cascade cut short resumes by itself: the session's record names its
// children, each child has its own job, and a repairer started afterwards
// finishes them all; the same request then answers done with every id.
func TestEraseCascadeCutShortFinishesByItself(t *testing.T) {
	e := newEnv(t)
	r := e.start(Config{})
	marker := strings.Repeat("Q", 64)
	e.eraseSession("cp", marker, "")
	e.eraseSession("cc1", marker, "cp")
	e.eraseSession("cc2", marker, "cc1")
	errKilled := errors.New("killed")
	hook := func(step string) error {
		if step == StepDeleted {
			return errKilled
		}
		return nil
	}
	r.svc.eraseStep.Store(&hook)
	got, code := e.erase(`{"sessionId":"cp","reason":"r","by":"b","cascade":true}`)
	if code != "" || got.State != EraseAccepted || len(got.Jobs) != 3 || len(got.Erased) != 0 {
		t.Fatalf("cut-short cascade answered %+v %q", got, code)
	}
	if rec, _, _ := e.store.ErasureOf(context.Background(), "cp"); rec == nil || !rec.Cascade || strings.Join(rec.Children, ",") != "cc1,cc2" {
		t.Fatalf("the record of cp: %+v", rec)
	}
	r.stop()
	e.start(Config{})
	for _, id := range []string{"cp", "cc1", "cc2"} {
		e.waitErased(id)
		e.gone(id)
	}
	if got, code := e.erase(`{"sessionId":"cp","reason":"r","by":"b","cascade":true}`); code != "" || got.State != EraseDone ||
		strings.Join(got.Erased, ",") != "cp,cc1,cc2" || got.Events != 24 {
		t.Fatalf("repeat: %+v %q", got, code)
	}
	if n := len(e.audits()); n != 3 {
		t.Fatalf("%d audit records, want 3", n)
	}
}

// An erase gives the session and the bytes of its events back to its
// tenant's usage in TENANT_USAGE (where the writer counted them), once:
// a repeated erase gives nothing more, and other tenants keep theirs.
func TestEraseGivesBackTenantUsage(t *testing.T) {
	e := newEnv(t)
	e.start(Config{})
	ctx := context.Background()
	id := "_Tacme_s-1"
	e.eraseSession(id, "M", "")
	n := e.storedBytes(id)
	for tenant, u := range map[string]logstore.TenantUsage{"acme": {Sessions: 2, Bytes: n + 1000}, "globex": {Sessions: 1, Bytes: 500}} {
		if _, _, err := e.store.AddUsage(ctx, tenant, u, nil); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		if _, code := e.erase(`{"sessionId":"_Tacme_s-1","reason":"privacy request","by":"ops"}`); code != "" {
			t.Fatalf("erase: %s", code)
		}
	}
	want := map[string]logstore.TenantUsage{"acme": {Sessions: 1, Bytes: 1000}, "globex": {Sessions: 1, Bytes: 500}}
	for tenant, w := range want {
		if got, err := e.store.UsageOf(ctx, tenant); err != nil || got != w {
			t.Fatalf("%s's usage after the erase: %+v (%v), want %+v", tenant, got, err, w)
		}
	}
}

// storedBytes is the size of the session's stored bodies.
func (e *env) storedBytes(id string) int64 {
	e.t.Helper()
	var n int64
	if _, err := e.store.ReadSession(context.Background(), id, 0, func(m *logstore.Msg) error {
		n += int64(len(m.Data))
		return nil
	}); err != nil {
		e.t.Fatal(err)
	}
	return n
}

// An erase job cut between its give-back and its record's next phase
// (StepRecords: as a kill there would) gives back once when it resumes:
// the give-back named the session in its tenant's value, and the resumed
// job finds it there; the name is dropped once the job is done.
func TestEraseCutAfterGiveBackGivesBackOnce(t *testing.T) {
	e := newEnv(t)
	r := e.start(Config{})
	ctx := context.Background()
	id := "_Tacme_s-1"
	e.eraseSession(id, "M", "")
	n := e.storedBytes(id)
	if _, _, err := e.store.AddUsage(ctx, "acme", logstore.TenantUsage{Sessions: 3, Bytes: 2*n + 1000}, nil); err != nil {
		t.Fatal(err)
	}
	errKilled := errors.New("killed")
	hook := func(step string) error {
		if step == StepRecords {
			return errKilled
		}
		return nil
	}
	r.svc.eraseStep.Store(&hook)
	if got, code := e.erase(`{"sessionId":"_Tacme_s-1","reason":"r","by":"b"}`); code != "" || got.State != EraseAccepted {
		t.Fatalf("cut erase answered %+v %q, want accepted", got, code)
	}
	if rec, _, _ := e.store.ErasureOf(ctx, id); rec == nil || rec.Phase != logstore.ErasePhaseRecords {
		t.Fatalf("record after the cut: %+v, want phase records", rec)
	}
	r.stop()
	e.start(Config{})
	e.waitErased(id)
	want := logstore.TenantUsage{Sessions: 2, Bytes: n + 1000}
	if got, err := e.store.UsageOf(ctx, "acme"); err != nil || got != want {
		t.Fatalf("acme's usage after the resumed erase: %+v (%v), want %+v", got, err, want)
	}
	js, err := jetstream.New(e.nc)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(ctx, logstore.UsageBucket)
	if err != nil {
		t.Fatal(err)
	}
	v, err := kv.Get(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(v.Value()), id) {
		t.Fatalf("acme's value after the erase is done: %s, want the session's name dropped", v.Value())
	}
}

// TestEraseAuditNamesOwnerAndGrants: the audit record names the erased
// session's owner and the agents it was granted to (session/created's
// and every session/granted's, once each), as the events folded say:
// a grant in a message on the session's subject that no reader reads
// (its SL-Seq header is not its seq; it names another session) is none.
// The digest and counts still cover every stored body, the new members
// aside, and the record holds no content. A session without an owner
// gets a record without the members.
func TestEraseAuditNamesOwnerAndGrants(t *testing.T) {
	e := newEnv(t)
	e.start(Config{})
	ctx := context.Background()
	marker := strings.Repeat("Q", 64)
	e.appendEvents("s-owned",
		`{"type":"session/created","data":{"owner":{"tenant":"AGENTS","agent":"alice"},"grants":["bob"]}}`,
		fmt.Sprintf(`{"type":"message/user","data":{"content":"user says %s"}}`, marker),
		`{"type":"session/granted","data":{"grants":["carol","bob"]}}`,
	)
	// mallory's grants, in messages stored on s-owned's subject that no
	// reader reads: an event of another session, and one whose SL-Seq
	// header is not its seq (a fold that did not judge would take it).
	loc, err := e.store.Locate("s-owned")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []struct {
		session, header string
	}{{"s-owned", "9"}, {"s-mallory", ""}} {
		m := nats.NewMsg(loc.Subject)
		m.Data, _ = json.Marshal(schema.Envelope{SchemaVersion: schema.Version, SessionID: f.session, Seq: 4, EventID: "forged-" + f.session,
			Time: time.Now().UTC(), Type: schema.TypeSessionGranted, Data: json.RawMessage(`{"grants":["mallory"]}`)})
		if f.header != "" {
			m.Header.Set(logstore.HeaderSeq, f.header)
		}
		if err := e.nc.PublishMsg(m); err != nil {
			t.Fatal(err)
		}
	}
	var bodies [][]byte
	natstest.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		bodies = nil
		_, err := e.store.ReadStored(ctx, "s-owned", func(m *logstore.Msg) error {
			bodies = append(bodies, m.Data)
			return nil
		})
		if len(bodies) != 5 || err != nil {
			return fmt.Errorf("the forged event is not stored yet: %d bodies, %v", len(bodies), err)
		}
		return nil
	})
	if _, err := e.store.ReadJudged(ctx, &logstore.Judge{SessionID: "s-owned"}, nil); !errors.Is(err, logstore.ErrUnreadable) {
		t.Fatalf("the forged event is judged %v, want unreadable", err)
	}
	h := sha256.New()
	for _, b := range bodies {
		h.Write(b)
	}
	sum := hex.EncodeToString(h.Sum(nil))
	e.appendEvents("s-plain", `{"type":"session/created"}`)

	for _, id := range []string{"s-owned", "s-plain"} {
		if _, code := e.erase(`{"sessionId":"` + id + `","reason":"r","by":"ops"}`); code != "" {
			t.Fatalf("erase %s: %s", id, code)
		}
		e.waitErased(id)
	}
	recs := e.audits()
	if len(recs) != 2 {
		t.Fatalf("%d audit records, want 2", len(recs))
	}
	r := recs[0]
	if len(bodies) != 5 || r.SessionID != "s-owned" || r.SHA256 != sum || r.Events != 5 || r.LastSeq != 5 ||
		r.Owner == nil || *r.Owner != (schema.Owner{Tenant: "AGENTS", Agent: "alice"}) || !slices.Equal(r.Grants, []string{"bob", "carol"}) {
		t.Fatalf("audit %+v of %d bodies, want sha256 %s over 5, owner AGENTS/alice, grants [bob carol]", r, len(bodies), sum)
	}
	raw, err := json.Marshal(recs)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), marker) || strings.Contains(string(raw), "mallory") {
		t.Fatalf("the audit records hold content: %s", raw)
	}
	if p := recs[1]; p.SessionID != "s-plain" || p.Owner != nil || p.Grants != nil || strings.Count(string(raw), `"owner"`) != 1 {
		t.Fatalf("audit of a session without an owner: %s", raw)
	}
}

// TestEraseAuditNamesGrantsStoredDuringTheErase: a session/granted that
// lands after the erase read the session's owner and grants (a writer
// that had not seen the record yet) and before the seal is in the digest,
// and its grantee is in the audit record: the job folds the events it
// hashes after where the request's fold ended. So it is when the job is
// cut short and resumed by another eraser, before it deleted anything
// (it folds the session again) or after the seal's first delete (the
// grant folds into the record's owner and grants). A forged grant stored
// after it (its SL-Seq header is not its seq) is in the digest, never in
// the audit, and so is a grant stored after session/closed (it does not
// fold: no reader counts it).
func TestEraseAuditNamesGrantsStoredDuringTheErase(t *testing.T) {
	type at struct {
		step string
		nth  int
	}
	for name, tc := range map[string]struct {
		grant, kill at // kill: the zero at, none
		closed      bool
	}{
		"in-one-job":           {grant: at{StepHashed, 1}},
		"after-close":          {grant: at{StepHashed, 1}, closed: true},
		"resumed-before-seal":  {grant: at{StepMarked, 1}, kill: at{StepMarked, 1}},
		"resumed-after-delete": {grant: at{StepHashed, 1}, kill: at{StepDeleted, 1}},
	} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			r := e.start(Config{})
			ctx := context.Background()
			events := []string{
				`{"type":"session/created","data":{` + eraseOwner + `}}`,
				`{"type":"turn/started","turnId":"t1"}`,
				`{"type":"message/user","turnId":"t1","data":{"content":"hello"}}`,
				`{"type":"turn/ended","turnId":"t1","data":{"reason":"completed"}}`,
			}
			wantGrants := []string{"bob", "dave"}
			if tc.closed {
				events = append(events, `{"type":"session/closed","data":{"reason":"done"}}`)
				wantGrants = wantGrants[:1]
			}
			e.appendEvents("s-g", events...)
			stored := len(events) + 2 // the grant and the forged one
			loc, err := e.store.Locate("s-g")
			if err != nil {
				t.Fatal(err)
			}
			var bodies [][]byte
			errKilled := errors.New("killed")
			seen := map[string]int{}
			hook := func(step string) error {
				seen[step]++
				if step == tc.grant.step && seen[step] == tc.grant.nth {
					if _, err := e.tryAppend("s-g", `{"type":"session/granted","data":{"grants":["dave"]}}`); err != nil {
						t.Errorf("grant: %v", err)
					}
					m := nats.NewMsg(loc.Subject)
					m.Data, _ = json.Marshal(schema.Envelope{SchemaVersion: schema.Version, SessionID: "s-g", Seq: uint64(stored), EventID: "forged",
						Time: time.Now().UTC(), Type: schema.TypeSessionGranted, Data: json.RawMessage(`{"grants":["mallory"]}`)})
					m.Header.Set(logstore.HeaderSeq, "9")
					if _, err := e.nc.RequestMsg(m, 10*time.Second); err != nil {
						t.Errorf("forged grant: %v", err)
					}
					if _, err := e.store.ReadStored(ctx, "s-g", func(m *logstore.Msg) error {
						bodies = append(bodies, m.Data)
						return nil
					}); err != nil {
						t.Errorf("read: %v", err)
					}
					if _, err := e.store.ReadJudged(ctx, &logstore.Judge{SessionID: "s-g"}, nil); !errors.Is(err, logstore.ErrUnreadable) {
						t.Errorf("the forged grant is judged %v, want unreadable", err)
					}
				}
				if step == tc.kill.step && seen[step] == tc.kill.nth {
					return errKilled
				}
				return nil
			}
			r.svc.eraseStep.Store(&hook)
			_, code := e.erase(`{"sessionId":"s-g","reason":"r","by":"b"}`)
			if tc.kill.step != "" {
				if rec, _, _ := e.store.ErasureOf(ctx, "s-g"); rec == nil || rec.Done {
					t.Fatalf("record after the kill: %+v (%s)", rec, code)
				}
				r.stop()
				e.start(Config{})
			} else if code != "" {
				t.Fatalf("erase: %s", code)
			}
			e.waitErased("s-g")
			e.gone("s-g")
			h := sha256.New()
			for _, b := range bodies {
				h.Write(b)
			}
			recs := e.audits()
			if len(bodies) != stored || len(recs) != 1 || recs[0].Events != uint64(stored) || recs[0].SHA256 != hex.EncodeToString(h.Sum(nil)) ||
				recs[0].Owner == nil || *recs[0].Owner != (schema.Owner{Tenant: "AGENTS", Agent: "alice"}) || !slices.Equal(recs[0].Grants, wantGrants) {
				t.Fatalf("audit %+v over %d bodies, want %d events and their digest, owner AGENTS/alice, grants %v", recs, len(bodies), stored, wantGrants)
			}
		})
	}
}
