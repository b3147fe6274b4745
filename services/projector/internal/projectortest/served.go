package projectortest

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/memlog"
	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/services/projector"
	"github.com/sessionlog/sessionlog/services/projector/httpapi"
	"github.com/sessionlog/sessionlog/services/projector/store"
)

// Served is the HTTP side alone (an httpapi.Server) over views folded
// from a log in memory (internal/memlog): no NATS server, no projector
// running. Tests of what the HTTP side answers over stored views (request
// validation, pages, tenants' names) run on it; those of the fold, the
// consume loop or NATS run on a whole projector (Env.Start).
type Served struct {
	*httpapi.Server
	// Log is the log the views were folded from and the server reads.
	Log *memlog.Log
	// DB holds the views.
	DB *store.DB
	// Srv serves the Server's Handler.
	Srv *httptest.Server
}

// Serve folds every stream of l, up to its last message, into a Pebble
// store (projector.Rebuild: the projector's fold, run once to that
// position) and serves an httpapi.Server over the views and l, its
// Config changed by mod; it stops when the test ends. Messages appended
// to l later are not folded. The server's views have no search: Terms
// cuts no query into terms (searches answer as for a query of none).
func Serve(t *testing.T, l *memlog.Log, mod ...func(*httpapi.Config)) *Served {
	t.Helper()
	ctx := context.Background()
	var to store.Checkpoint
	for _, name := range l.Streams() {
		held, err := l.LastHeldSeq(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		to.Streams = append(to.Streams, store.StreamPos{Name: name, Seq: held})
	}
	dir := filepath.Join(t.TempDir(), "views")
	if _, err := projector.Rebuild(ctx, l, dir, to, nil); err != nil {
		t.Fatal(err)
	}
	db, err := store.Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := httpapi.Config{Views: storeViews{db: db, log: l}, Log: httpapi.LogOf(l),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Registerer: prometheus.NewRegistry(),
		Now: time.Now, Heartbeat: 200 * time.Millisecond}
	for _, m := range mod {
		m(&cfg)
	}
	srv, err := httpapi.New(cfg)
	if err != nil {
		db.Close()
		t.Fatal(err)
	}
	s := &Served{Server: srv, Log: l, DB: db, Srv: httptest.NewServer(srv.Handler())}
	t.Cleanup(func() {
		s.Srv.CloseClientConnections()
		s.Srv.Close()
		if err := db.Close(); err != nil {
			t.Errorf("views: close: %v", err)
		}
	})
	return s
}

// NewMem is a log in memory of one partition.
func NewMem(t *testing.T) *memlog.Log {
	t.Helper()
	l, err := memlog.New(logstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// AppendMem appends events (complete envelopes of one session,
// contiguous in seq, after its tail) to l in one batch.
func AppendMem(t *testing.T, l *memlog.Log, events ...schema.Envelope) {
	t.Helper()
	if len(events) == 0 {
		return
	}
	ctx := context.Background()
	tail, err := l.Tail(ctx, events[0].SessionID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(ctx, logstore.AppendRequest{SessionID: events[0].SessionID, ExpectedStreamSeq: tail.StreamSeq, Events: events}); err != nil {
		t.Fatal(err)
	}
}

// URL is the root of the server.
func (s *Served) URL() string { return s.Srv.URL }

// Get is GET path of the server: status and body.
func (s *Served) Get(t *testing.T, path string) (int, []byte) {
	t.Helper()
	return get(t, s.Srv.URL+path)
}

// storeViews is a views store as the HTTP side reads it (httpapi.Views),
// with nothing folding into it: ready, never rolled back, erased as the
// log says.
type storeViews struct {
	db  *store.DB
	log *memlog.Log
}

func (v storeViews) View(fn func(store.Snapshot) error) error {
	snap := v.db.NewSnapshot()
	defer snap.Close()
	return fn(snap)
}

func (v storeViews) SetInternals(kvs [][2][]byte) error      { return v.db.SetInternals(kvs) }
func (v storeViews) Ready() error                            { return nil }
func (v storeViews) RolledBack() string                      { return "" }
func (v storeViews) Folded() (applied, repairs, lag float64) { return 0, 0, 0 }

func (v storeViews) Erased(id string) bool {
	erased, err := v.log.Erased(context.Background(), id)
	return err == nil && erased
}

// WatchErased registers nothing: no erasure lands while the server
// serves (the views are not folded further).
func (v storeViews) WatchErased(id string, _ *context.CancelFunc) bool { return !v.Erased(id) }
func (v storeViews) UnwatchErased(string, *context.CancelFunc)         {}

func (v storeViews) Terms(string) []string                     { return nil }
func (v storeViews) EventText(string, *schema.Envelope) string { return "" }
