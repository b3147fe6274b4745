package eraser

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// storedSealed reports whether the session's last stored event is sealed.
func (e *env) storedSealed(id string) bool {
	e.t.Helper()
	m, err := natstest.JetStream(e.t, e.nc).Stream(context.Background(), "SESSIONS")
	if err != nil {
		e.t.Fatal(err)
	}
	last, err := m.GetLastMsgForSubject(context.Background(), logstore.SubjectPrefix+id)
	if err != nil {
		e.t.Fatal(err)
	}
	return logstore.Sealed(last.Header)
}

// keyGone fails the test if the session's data key is still stored.
func (e *env) keyGone(id string) {
	e.t.Helper()
	js, err := jetstream.New(e.nc)
	if err != nil {
		e.t.Fatal(err)
	}
	kv, err := js.KeyValue(context.Background(), logstore.KeysBucket)
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := kv.Get(context.Background(), id); !errors.Is(err, jetstream.ErrKeyNotFound) {
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
