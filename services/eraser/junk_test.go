package eraser

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// TestEraseMessageThatIsNotAnEvent: a plain message on a session's
// subject that is not an event (an operator's raw publish) is counted in
// the audit's unhashed and deleted, not hashed as an event: the job
// finishes, in the middle of the session and as its tail at acceptance.
func TestEraseMessageThatIsNotAnEvent(t *testing.T) {
	for _, sealed := range []bool{false, true} {
		t.Run(fmt.Sprintf("middle/sealed-%v", sealed), func(t *testing.T) { eraseJunk(t, sealed, true) })
		t.Run(fmt.Sprintf("tail/sealed-%v", sealed), func(t *testing.T) { eraseJunk(t, sealed, false) })
	}
}

func eraseJunk(t *testing.T, sealed, eventAfter bool) {
	ctx := context.Background()
	e := newEnvWith(t, logstore.Config{SealBodies: sealed})
	sum := e.eraseSession("s-junk", strings.Repeat("J", 64), "")
	js, err := jetstream.New(e.nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, logstore.SubjectPrefix+"s-junk", []byte("not an event")); err != nil {
		t.Fatal(err)
	}
	// lastEvent: the stream seq of the session's last event, the one an
	// append from a cached tail expects.
	events, lastSeq, lastEvent := uint64(8), uint64(8), uint64(8)
	if eventAfter {
		ev := schema.Envelope{SchemaVersion: schema.Version, SessionID: "s-junk", Seq: 9, EventID: "s-junk-raw-9",
			Type: schema.TypeSessionClosed, Time: time.Now().UTC(), Data: json.RawMessage(`{"reason":"late"}`)}
		if _, err := e.store.PublishUnchecked(ctx, slices.Values([]schema.Envelope{ev})); err != nil {
			t.Fatal(err)
		}
		events, lastSeq, lastEvent = 9, 9, 10
		h := sha256.New()
		for after := uint64(0); ; {
			m, err := e.store.NextAfter(ctx, "s-junk", after)
			if err != nil {
				t.Fatal(err)
			}
			if m == nil {
				break
			}
			if string(m.Data) != "not an event" {
				h.Write(m.Data)
			}
			after = m.StreamSeq
		}
		sum = hex.EncodeToString(h.Sum(nil))
	}
	svc, err := New(Config{Store: e.store, Conn: e.nc})
	if err != nil {
		t.Fatal(err)
	}
	// The seal's purpose holds: once the record says sealed, the last
	// event is deleted (the junk tail deleted by the seal is not it).
	sealedSeen := false
	hook := func(step string) error {
		if step != StepDeleted || sealedSeen {
			return nil
		}
		rec, _, err := e.store.ErasureOf(ctx, "s-junk")
		if err != nil || rec == nil || !rec.Sealed {
			return err
		}
		sealedSeen = true
		if m, err := e.store.MsgAt(ctx, "SESSIONS", lastEvent); err != nil || m != nil {
			t.Errorf("sealed, and the last event (stream seq %d) is still stored (%v)", lastEvent, err)
		}
		return nil
	}
	svc.eraseStep.Store(&hook)
	req := EraseRequest{SessionID: "s-junk", Reason: "privacy", By: "ops"}
	for run := range 2 {
		got, err := svc.Erase(ctx, req)
		if err != nil || got.State != EraseDone {
			t.Fatalf("run %d of the job: %+v %v", run, got, err)
		}
	}
	if !sealedSeen {
		t.Fatal("no delete after the seal")
	}
	e.gone("s-junk")
	if sealed {
		e.keyGone("s-junk")
	}
	recs := e.audits()
	if len(recs) != 1 || recs[0].SHA256 != sum || recs[0].Events != events || recs[0].LastSeq != lastSeq || recs[0].Unhashed != 1 {
		t.Fatalf("audit %+v, want %d events hashed to seq %d (sha256 %s) and 1 unhashed", recs, events, lastSeq, sum)
	}
	if recs[0].Owner == nil || recs[0].Owner.Agent != "alice" {
		t.Fatalf("audit owner %+v, want alice's", recs[0].Owner)
	}
}
