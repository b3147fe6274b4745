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
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/internal/natstest/tamper"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// storedSealed reports whether the session's last stored event is sealed.
func (e *env) storedSealed(id string) bool {
	e.t.Helper()
	loc, err := e.store.Locate(id)
	if err != nil {
		e.t.Fatal(err)
	}
	m, err := natstest.JetStream(e.t, e.nc).Stream(context.Background(), loc.Stream)
	if err != nil {
		e.t.Fatal(err)
	}
	last, err := m.GetLastMsgForSubject(context.Background(), loc.Subject)
	if err != nil {
		e.t.Fatal(err)
	}
	return logstore.Sealed(last.Header)
}

// keys is the bucket of the sessions' data keys (SESSION_KEYS).
func (e *env) keys() jetstream.KeyValue {
	e.t.Helper()
	kv, err := natstest.JetStream(e.t, e.nc).KeyValue(context.Background(), logstore.KeysBucket)
	if err != nil {
		e.t.Fatal(err)
	}
	return kv
}

// keyGone fails the test if the session's data key is still stored.
func (e *env) keyGone(id string) {
	e.t.Helper()
	if _, err := e.keys().Get(context.Background(), id); !errors.Is(err, jetstream.ErrKeyNotFound) {
		e.t.Fatalf("%s: key left (%v)", id, err)
	}
}

// A session with sealed bodies is erased by destroying its key and
// purging its subject: the secure deletes are only the seal's (its first
// event and its tail) and, in a session holding plain events written
// before sealing, those. The audit is the one the slow way writes.
func TestEraseShredsSealedSession(t *testing.T) {
	e := newEnvWith(t, logstore.Config{SealBodies: true})
	r := e.start(Config{})
	var deletes atomic.Int64
	hook := func(step string) error {
		if step == StepDeleted {
			deletes.Add(1)
		}
		return nil
	}
	r.svc.eraseStep.Store(&hook)
	marker := strings.Repeat("Q", 64)
	sum := e.eraseSession("s-seal", marker, "")

	// "s-mix": two plain events, then three sealed.
	sealing := e.store
	plain, err := logstore.Open(context.Background(), e.nc, logstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	e.store = plain
	e.appendEvents("s-mix", `{"type":"session/created"}`, `{"type":"turn/started","turnId":"t1"}`)
	e.store = sealing
	e.appendEvents("s-mix", `{"type":"turn/ended","turnId":"t1","data":{"reason":"completed"}}`,
		`{"type":"turn/started","turnId":"t2"}`, `{"type":"turn/ended","turnId":"t2","data":{"reason":"completed"}}`)

	for _, c := range []struct {
		id      string
		deletes int64
	}{{"s-seal", 3}, {"s-mix", 4}} {
		deletes.Store(0)
		if got, code := e.erase(`{"sessionId":"` + c.id + `","reason":"privacy","by":"ops"}`); code != "" {
			t.Fatalf("erase %s: %+v %s", c.id, got, code)
		}
		e.waitErased(c.id)
		e.gone(c.id)
		e.keyGone(c.id)
		// s-seal: the seal's two and the key's; s-mix: those and its
		// second plain event.
		if n := deletes.Load(); n != c.deletes {
			t.Fatalf("%d secure deletes of %s, want %d", n, c.id, c.deletes)
		}
	}
	recs := e.audits()
	if len(recs) != 2 || recs[0].SHA256 != sum || recs[0].Events != 8 || recs[1].SessionID != "s-mix" || recs[1].Events != 5 {
		t.Fatalf("audits %+v, want s-seal's with sha256 %s", recs, sum)
	}
	// A read answers erased.
	if _, _, err := e.store.ReadEvents(context.Background(), "s-seal", 0); err != nil && schema.CodeOf(err) != schema.CodeErased {
		t.Fatalf("read after: %v", err)
	}
}

// A sealed event stored around the writer past the erase's seal after the
// shred looked at the leader and before it destroyed the key (an
// operator's raw publish, sealed with the key its store had cached) can
// never be hashed: the job deletes it, its audit counts it apart
// (unhashed: 1) beside the digest of the events it hashed, and the job
// finishes, also when cut right after the record that counts it (the
// resumed job counts it once). Before, its read answered erased (the key
// gone) on every run of the job, which never finished.
func TestEraseSealedEventStoredAroundTheShred(t *testing.T) {
	// cut: the job stops after its nth record write with a new digest
	// (StepHashed: the seal's is the first, the one counting the late
	// event the second); 0: not cut.
	for _, cut := range []int{0, 2} {
		t.Run(fmt.Sprintf("cut-%d", cut), func(t *testing.T) { eraseAroundTheShred(t, cut) })
	}
}

func eraseAroundTheShred(t *testing.T, cut int) {
	ctx := context.Background()
	var late atomic.Pointer[func()]
	e := newEnvWith(t, logstore.Config{SealBodies: true, FaultHook: func(f logstore.FaultStage) error {
		if p := late.Load(); f == logstore.FaultShredKey && p != nil && late.CompareAndSwap(p, nil) {
			(*p)()
		}
		return nil
	}})
	sum := e.eraseSession("s-late", strings.Repeat("L", 64), "")
	// The operator's store read the session: its cache holds the key.
	op, err := logstore.Open(ctx, e.nc, logstore.Config{SealBodies: true})
	if err != nil {
		t.Fatal(err)
	}
	if evs, _, err := op.ReadEvents(ctx, "s-late", 0); err != nil || len(evs) != 8 {
		t.Fatalf("operator's read: %d events, %v", len(evs), err)
	}
	publish := func() {
		ev := schema.Envelope{SchemaVersion: schema.Version, SessionID: "s-late", Seq: 9, EventID: "s-late-raw-9",
			Type: schema.TypeSessionClosed, Time: time.Now().UTC(), Data: json.RawMessage(`{"reason":"late"}`)}
		if _, err := op.PublishUnchecked(ctx, slices.Values([]schema.Envelope{ev})); err != nil {
			t.Errorf("raw publish: %v", err)
		}
	}
	late.Store(&publish)

	svc, err := New(Config{Store: e.store, Conn: e.nc})
	if err != nil {
		t.Fatal(err)
	}
	hashed := 0
	hook := func(step string) error {
		if step == StepHashed {
			if hashed++; hashed == cut {
				return errors.New("killed")
			}
		}
		return nil
	}
	svc.eraseStep.Store(&hook)
	req := EraseRequest{SessionID: "s-late", Reason: "privacy", By: "ops"}
	if cut > 0 {
		if _, err := svc.Erase(ctx, req); err == nil || !strings.Contains(err.Error(), "killed") {
			t.Fatalf("the cut job answered %v", err)
		}
		if hashed != cut {
			t.Fatalf("the job was cut at its record write %d, want %d", hashed, cut)
		}
	}
	for run := range 2 {
		got, err := svc.Erase(ctx, req)
		if err != nil || got.State != EraseDone {
			t.Fatalf("run %d of the job: %+v %v", run, got, err)
		}
	}
	if late.Load() != nil {
		t.Fatal("the shred did not reach its key's delete")
	}
	e.gone("s-late")
	e.keyGone("s-late")
	recs := e.audits()
	if len(recs) != 1 || recs[0].SHA256 != sum || recs[0].Events != 8 || recs[0].LastSeq != 8 || recs[0].Unhashed != 1 {
		t.Fatalf("audit %+v, want 8 events hashed (sha256 %s) and 1 unhashed", recs, sum)
	}
}

// A sealed body stored before the erase that does not open while its key
// exists (garbled in place: a corrupted block) is in the range the job
// hashes first. It can never be hashed: the job deletes it, its audit
// counts it apart (unhashed: 1) beside the digest and count of the
// events it hashed, and the job finishes; with 8 events the seal's read
// goes by leader reads, with 12 by a consumer. Before, the seal's read
// failed on it on every run of the job ("the sealed body does not
// open"), which never finished.
func TestEraseSealedBodyThatDoesNotOpenInTheDigest(t *testing.T) {
	for _, extra := range []int{0, 4} {
		t.Run(fmt.Sprintf("events-%d", 8+extra), func(t *testing.T) { eraseGarbled(t, extra) })
	}
}

func eraseGarbled(t *testing.T, extra int) {
	ctx := context.Background()
	e := newEnvWith(t, logstore.Config{SealBodies: true})
	e.eraseSession("s-garbled", strings.Repeat("G", 64), "")
	for i := range extra {
		e.appendEvents("s-garbled", fmt.Sprintf(`{"type":"session/granted","data":{"grants":["g%d"]}}`, i))
	}
	bodies := e.bodies("s-garbled")
	tamper.BreakChainAt(t, e.nc, "SESSIONS", logstore.SubjectPrefix+"s-garbled", tamper.BreakGarble, 3)
	h := sha256.New()
	for i, b := range bodies {
		if i != 3 {
			h.Write(b)
		}
	}
	sum := hex.EncodeToString(h.Sum(nil))

	svc, err := New(Config{Store: e.store, Conn: e.nc})
	if err != nil {
		t.Fatal(err)
	}
	req := EraseRequest{SessionID: "s-garbled", Reason: "privacy", By: "ops"}
	n := uint64(len(bodies))
	for run := range 2 {
		got, err := svc.Erase(ctx, req)
		if err != nil || got.State != EraseDone {
			t.Fatalf("run %d of the job: %+v %v", run, got, err)
		}
		// Every message deleted, the unhashed one too, of as many.
		if j := got.Jobs[0]; j.Deleted != n || j.Total != n {
			t.Fatalf("run %d: job %+v, want %d deleted of %d", run, j, n, n)
		}
	}
	if rec, _, err := e.store.ErasureOf(ctx, "s-garbled"); err != nil || rec.Deleted != n || rec.Total != n || rec.Events+rec.Unhashed != n {
		t.Fatalf("record %+v %v, want %d deleted of %d", rec, err, n, n)
	}
	e.gone("s-garbled")
	e.keyGone("s-garbled")
	recs := e.audits()
	if len(recs) != 1 || recs[0].SHA256 != sum || recs[0].Events != n-1 || recs[0].LastSeq != n || recs[0].Unhashed != 1 {
		t.Fatalf("audit %+v, want %d events hashed (sha256 %s) and 1 unhashed", recs, n-1, sum)
	}
}
