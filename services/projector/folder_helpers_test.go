package projector

import (
	"strconv"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/services/projector/store"
)

// newTestFolder is a folder on a fresh store in a temp dir, without a log
// (so no restore: cache holds every session the caller folds).
func newTestFolder(tb testing.TB, cache int) (*folder, *store.DB) {
	tb.Helper()
	db, err := store.Open(tb.TempDir(), store.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	met, err := newMetrics(prometheus.NewRegistry())
	if err != nil {
		tb.Fatal(err)
	}
	return newFolder(db, nil, met, cache, DefaultConfig().SnapshotEvery, []store.StreamPos{{Name: logstore.StreamName}}), db
}

// storedMsg is event e as the writer stores it at streamSeq: its
// session's subject, its seq header and its encoded body.
func storedMsg(tb testing.TB, e *schema.Envelope, streamSeq uint64) msg {
	tb.Helper()
	body, err := schema.Encode(e)
	if err != nil {
		tb.Fatal(err)
	}
	loc, _ := logstore.Locate(e.SessionID)
	h := nats.Header{}
	h.Set(logstore.HeaderSeq, strconv.FormatUint(e.Seq, 10))
	h.Set(logstore.HeaderType, e.Type)
	return msg{stream: logstore.StreamName, streamSeq: streamSeq, subject: loc.Subject, header: h, data: body}
}

// commit flushes the folder's open batch and waits for it to land, so
// that the caller reads it from the store.
func commit(tb testing.TB, f *folder) {
	tb.Helper()
	if err := f.flush(); err != nil {
		tb.Fatal(err)
	}
	if err := f.landed(); err != nil {
		tb.Fatal(err)
	}
}
