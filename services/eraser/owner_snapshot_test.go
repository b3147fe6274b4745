package eraser

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/snapshottest"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// countingLog is the store, counting the events ReadJudged gives.
type countingLog struct {
	*logstore.Store
	read atomic.Int64
}

func (c *countingLog) ReadJudged(ctx context.Context, j *logstore.Judge, fn func(m *logstore.Msg, ev *schema.Envelope) error) (logstore.Tail, error) {
	return c.Store.ReadJudged(ctx, j, func(m *logstore.Msg, ev *schema.Envelope) error {
		c.read.Add(1)
		return fn(m, ev)
	})
}

// TestEraseReadsOwnerFromTheSnapshot: the owner and grants an erase
// request folds for its record are read from the session's snapshot and
// the events after it, so that the request's read does not grow with the
// session: a grant before the snapshot and one after it are both named,
// and only the events after the snapshot are read.
func TestEraseReadsOwnerFromTheSnapshot(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	lines := []string{`{"type":"session/created","data":{"owner":{"tenant":"AGENTS","agent":"alice"},"grants":["bob"]}}`,
		`{"type":"session/granted","data":{"grants":["carol"]}}`}
	for len(lines) < 300 {
		lines = append(lines, `{"type":"message/user","data":{"content":"hi"}}`)
	}
	for i := 0; i < len(lines); i += schema.MaxBatchEvents {
		e.appendEvents("s-long", lines[i:min(i+schema.MaxBatchEvents, len(lines))]...)
	}
	// A writer that snapshots every 100 events folds the session whole
	// for one more event and stores a snapshot at it.
	if h := snapshottest.ByWriter(t, e.store, e.nc, "s-long")["s-long"]; h.Seq != 301 {
		t.Fatalf("snapshot head %+v: want one at seq 301", h)
	}
	e.appendEvents("s-long", `{"type":"message/user","data":{"content":"hi"}}`, `{"type":"session/granted","data":{"grants":["dave"]}}`)

	c := &countingLog{Store: e.store}
	svc, err := New(Config{Store: c, Conn: e.nc})
	if err != nil {
		t.Fatal(err)
	}
	rec := logstore.Erasure{SessionID: "s-long"}
	if err := svc.ownerOf(ctx, &rec); err != nil {
		t.Fatal(err)
	}
	if rec.Owner == nil || rec.Owner.Agent != "alice" || !slices.Equal(rec.Grants, []string{"bob", "carol", "dave"}) {
		t.Fatalf("owner %+v grants %v, want alice and bob, carol, dave", rec.Owner, rec.Grants)
	}
	if n := c.read.Load(); n != 2 {
		t.Fatalf("the owner's fold read %d events, want the 2 after the snapshot", n)
	}
}

// erasureReads is the store, counting the erasure records read, by
// session.
type erasureReads struct {
	*logstore.Store
	n map[string]int
}

func (c *erasureReads) ErasureOf(ctx context.Context, sessionID string) (*logstore.Erasure, uint64, error) {
	c.n[sessionID]++
	return c.Store.ErasureOf(ctx, sessionID)
}

// TestEraseReadsTheRecordOnce: accepting an erase reads the session's
// erasure record once: the read that finds none is the one the record's
// owner and grants are folded by, not read again before the fold.
func TestEraseReadsTheRecordOnce(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.appendEvents("s-owned", `{"type":"session/created","data":{"owner":{"tenant":"AGENTS","agent":"alice"},"grants":["bob"]}}`,
		`{"type":"message/user","data":{"content":"hi"}}`)
	c := &erasureReads{Store: e.store, n: map[string]int{}}
	svc, err := New(Config{Store: c, Conn: e.nc})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.acceptErase(ctx, EraseRequest{SessionID: "s-owned", Reason: "test", By: "test"}); err != nil {
		t.Fatal(err)
	}
	if n := c.n["s-owned"]; n != 1 {
		t.Fatalf("accepting the erase read the erasure record %d times, want 1", n)
	}
	rec, _, err := e.store.ErasureOf(ctx, "s-owned")
	if err != nil || rec == nil || rec.Owner == nil || rec.Owner.Agent != "alice" || !slices.Equal(rec.Grants, []string{"bob"}) {
		t.Fatalf("record %+v, %v: want one naming alice and bob", rec, err)
	}
}
