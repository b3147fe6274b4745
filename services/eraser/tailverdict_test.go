package eraser

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest/tamper"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// TestEraseSessionEndingInUnreadableMessage: an erase of a session whose
// last message Tail refuses is accepted and finishes, whatever the
// verdict: a sealed body that does not open (garbled in place) is
// deleted and counted in the audit's unhashed; an event of a newer schema
// stored without SL-Seq is an event, hashed and counted as one. Before,
// both were refused at acceptance (the tail did not read), so the
// session could not be erased.
func TestEraseSessionEndingInUnreadableMessage(t *testing.T) {
	t.Run(logstore.KindUnopened, func(t *testing.T) {
		e := newEnvWith(t, logstore.Config{SealBodies: true})
		e.eraseSession("s-endbad", strings.Repeat("U", 64), "")
		bodies := e.bodies("s-endbad")
		last := len(bodies) - 1
		tamper.BreakChainAt(t, e.nc, "SESSIONS", logstore.SubjectPrefix+"s-endbad", tamper.BreakGarble, last)
		h := sha256.New()
		for _, b := range bodies[:last] {
			h.Write(b)
		}
		n := uint64(last)
		eraseToTheEnd(t, e, "s-endbad", hex.EncodeToString(h.Sum(nil)), n, n, 1)
		e.keyGone("s-endbad")
	})
	t.Run(logstore.KindNewer, func(t *testing.T) {
		ctx := context.Background()
		e := newEnv(t)
		e.eraseSession("s-endbad", strings.Repeat("N", 64), "")
		newer := fmt.Sprintf(`{"schemaVersion":%d,"sessionId":"s-endbad","seq":9,"eventId":"s-endbad-9","type":"session/closed","time":"2026-12-01T00:00:00Z"}`, schema.Version+1)
		js, err := jetstream.New(e.nc)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := js.Publish(ctx, logstore.SubjectPrefix+"s-endbad", []byte(newer)); err != nil {
			t.Fatal(err)
		}
		if _, err := e.store.Tail(ctx, "s-endbad"); err == nil {
			t.Fatal("Tail reads the newer event's tail: the test stores no unreadable tail")
		}
		h := sha256.New()
		if err := eachStored(ctx, e.store, "s-endbad", func(m *logstore.Msg) { h.Write(m.Data) }); err != nil {
			t.Fatal(err)
		}
		eraseToTheEnd(t, e, "s-endbad", hex.EncodeToString(h.Sum(nil)), 9, 9, 0)
	})
}

// eachStored calls fn with each message stored for the session, read
// one at a time from the leader (as stored: no judge, no tail).
func eachStored(ctx context.Context, st *logstore.Store, id string, fn func(*logstore.Msg)) error {
	for after := uint64(0); ; {
		m, err := st.NextAfter(ctx, id, after)
		if err != nil || m == nil {
			return err
		}
		fn(m)
		after = m.StreamSeq
	}
}

// eraseToTheEnd erases id twice (the second a repeat of a done job) and
// checks it is gone and its audit record: events hashed to lastSeq with
// digest sum, unhashed apart.
func eraseToTheEnd(t *testing.T, e *env, id, sum string, events, lastSeq, unhashed uint64) {
	t.Helper()
	svc, err := New(Config{Store: e.store, Conn: e.nc})
	if err != nil {
		t.Fatal(err)
	}
	req := EraseRequest{SessionID: id, Reason: "privacy", By: "ops"}
	for run := range 2 {
		got, err := svc.Erase(context.Background(), req)
		if err != nil || got.State != EraseDone {
			t.Fatalf("run %d of the job: %+v %v", run, got, err)
		}
	}
	e.gone(id)
	recs := e.audits()
	if len(recs) != 1 || recs[0].SHA256 != sum || recs[0].Events != events || recs[0].LastSeq != lastSeq || recs[0].Unhashed != unhashed {
		t.Fatalf("audit %+v, want %d events hashed to seq %d (sha256 %s) and %d unhashed", recs, events, lastSeq, sum, unhashed)
	}
	if recs[0].Owner == nil || recs[0].Owner.Agent != "alice" {
		t.Fatalf("audit owner %+v, want alice's", recs[0].Owner)
	}
}

// bodies are the session's event bodies as read (opened), in order.
func (e *env) bodies(id string) [][]byte {
	e.t.Helper()
	var out [][]byte
	if _, err := e.store.ReadSession(context.Background(), id, 0, func(m *logstore.Msg) error {
		out = append(out, m.Data)
		return nil
	}); err != nil {
		e.t.Fatal(err)
	}
	return out
}

// TestEraseSessionWhoseKeyIsGone: a sealed session whose key is gone
// from SESSION_KEYS (destroyed around the eraser) but which has no
// erasure record is accepted and erased: none of its bodies opens, so
// none is hashed, each is deleted and counted in the audit's unhashed.
// Before, reading its tail failed with ErrKeyGone, which TailPosition did
// not turn into a position, so the erase was refused on every request.
func TestEraseSessionWhoseKeyIsGone(t *testing.T) {
	ctx := context.Background()
	e := newEnvWith(t, logstore.Config{SealBodies: true})
	e.eraseSession("s-nokey", strings.Repeat("K", 64), "")
	kv := e.keys()
	if err := kv.Purge(ctx, "s-nokey"); err != nil {
		t.Fatal(err)
	}
	// A store that has not cached the key, as an eraser started after.
	var err error
	if e.store, err = logstore.Open(ctx, e.nc, logstore.Config{SealBodies: true}); err != nil {
		t.Fatal(err)
	}
	svc, err := New(Config{Store: e.store, Conn: e.nc})
	if err != nil {
		t.Fatal(err)
	}
	req := EraseRequest{SessionID: "s-nokey", Reason: "privacy", By: "ops"}
	for run := range 2 {
		got, err := svc.Erase(ctx, req)
		if err != nil || got.State != EraseDone {
			t.Fatalf("run %d of the job: %+v %v", run, got, err)
		}
	}
	e.gone("s-nokey")
	e.keyGone("s-nokey")
	empty := sha256.Sum256(nil)
	recs := e.audits()
	if len(recs) != 1 || recs[0].Events != 0 || recs[0].Unhashed != 8 || recs[0].SHA256 != hex.EncodeToString(empty[:]) {
		t.Fatalf("audit %+v, want no event hashed and 8 unhashed", recs)
	}
}

// TestKeyGoneEraseGivesBackUsage: an erase whose messages are all
// unhashed (a sealed session whose key is gone) gives the session and the
// stored bytes of its messages back to its tenant's usage. Before, only
// hashed events' bytes were given back, and an erase with no event
// hashed gave nothing back.
func TestKeyGoneEraseGivesBackUsage(t *testing.T) {
	ctx := context.Background()
	e := newEnvWith(t, logstore.Config{SealBodies: true})
	id := "_Tacme_s-nokey"
	e.eraseSession(id, "K", "")
	if err := e.keys().Purge(ctx, id); err != nil {
		t.Fatal(err)
	}
	var err error
	if e.store, err = logstore.Open(ctx, e.nc, logstore.Config{SealBodies: true}); err != nil {
		t.Fatal(err)
	}
	// The bodies as stored (sealed; no key opens them now).
	var stored int64
	for after := uint64(0); ; {
		m, err := e.store.NextAfter(ctx, id, after)
		if m == nil {
			break
		}
		if !errors.Is(err, logstore.ErrKeyGone) {
			t.Fatalf("stream seq %d: %v, want its key gone", m.StreamSeq, err)
		}
		stored += int64(len(m.Data))
		after = m.StreamSeq
	}
	if _, _, err := e.store.AddUsage(ctx, "acme", logstore.TenantUsage{Sessions: 2, Bytes: stored + 1000}, nil); err != nil {
		t.Fatal(err)
	}
	svc, err := New(Config{Store: e.store, Conn: e.nc})
	if err != nil {
		t.Fatal(err)
	}
	for run := range 2 {
		got, err := svc.Erase(ctx, EraseRequest{SessionID: id, Reason: "privacy", By: "ops"})
		if err != nil || got.State != EraseDone {
			t.Fatalf("run %d of the job: %+v %v", run, got, err)
		}
	}
	e.gone(id)
	want := logstore.TenantUsage{Sessions: 1, Bytes: 1000}
	if got, err := e.store.UsageOf(ctx, "acme"); err != nil || got != want {
		t.Fatalf("acme's usage after the erase: %+v (%v), want %+v (%d stored bytes given back)", got, err, want, stored)
	}
}
