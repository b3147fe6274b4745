package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// The import floor publishes the very messages of a stored session again
// under the floor's id: same bodies, same headers but the message id, in
// batches whose per-subject expectations hold.
func TestImportFloorStoresTheSameMessages(t *testing.T) {
	ctx := context.Background()
	e, err := startEmbedded(ctx, t.TempDir(), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer e.close()
	const sid, fid, n = "cc-session-1", "floor-ssion-1", 7
	var evs []schema.Envelope
	for i := range n {
		evs = append(evs, schema.Envelope{SchemaVersion: schema.Version, SessionID: sid, Seq: uint64(i + 1), EventID: fmt.Sprintf("e%d", i+1),
			Time: time.Now().UTC(), Type: schema.TypeMessageUser, Data: json.RawMessage(fmt.Sprintf(`{"content":"event %d"}`, i+1))})
	}
	if _, err := e.st.Append(ctx, logstore.AppendRequest{SessionID: sid, Events: evs}); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "spool")
	sp, err := CreateSpool(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.ReadSession(ctx, sid, 0, sp.Add); err != nil {
		t.Fatal(err)
	}
	k, _, err := sp.Close()
	if err != nil || k != n {
		t.Fatalf("spooled %d messages (%v), want %d", k, err, n)
	}
	loc, err := e.st.Locate(fid)
	if err != nil {
		t.Fatal(err)
	}
	// Batches of 3: the second and third carry an expectation of the
	// stream seq before them.
	got, err := ImportFloor(ctx, e.nc, []FloorSession{{ID: fid, Subject: loc.Subject, Spool: path, Events: k}}, 3, 2)
	if err != nil || got != n {
		t.Fatalf("floor published %d (%v), want %d", got, err, n)
	}
	var orig, copied []*logstore.Msg
	for _, r := range []struct {
		id  string
		out *[]*logstore.Msg
	}{{sid, &orig}, {fid, &copied}} {
		if _, err := e.st.ReadSession(ctx, r.id, 0, func(m *logstore.Msg) error { *r.out = append(*r.out, m); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	if len(copied) != len(orig) {
		t.Fatalf("%d messages under the floor id, %d stored", len(copied), len(orig))
	}
	for i, m := range copied {
		o := orig[i]
		if !bytes.Equal(m.Data, o.Data) {
			t.Errorf("message %d: body %s, stored %s", i, m.Data, o.Data)
		}
		for _, h := range []string{logstore.HeaderType, logstore.HeaderSeq, logstore.HeaderSchema} {
			if m.Header.Get(h) != o.Header.Get(h) {
				t.Errorf("message %d: %s %q, stored %q", i, h, m.Header.Get(h), o.Header.Get(h))
			}
		}
		if want := logstore.MsgID(fid, evs[i].EventID); m.Header.Get(logstore.HeaderMsgID) != want {
			t.Errorf("message %d: message id %q, want %q", i, m.Header.Get(logstore.HeaderMsgID), want)
		}
	}
}
