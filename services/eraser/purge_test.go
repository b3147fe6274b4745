package eraser

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
)

// newNoPurgeEnv is newEnvWith on a server whose one user may do anything
// but purge a stream: the eraser of a deployment that seals with an
// auth.conf older than sealing (DESIGN.md section 14).
func newNoPurgeEnv(t *testing.T, cfg logstore.Config) *env {
	t.Helper()
	opts := natstest.Options(t.TempDir())
	opts.Users = []*server.User{{Username: "eraser", Password: "pw", Permissions: &server.Permissions{
		Publish: &server.SubjectPermission{Allow: []string{">"}, Deny: []string{"$JS.API.STREAM.PURGE.>"}},
	}}}
	srv, err := natstest.Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	nc := natstest.Connect(t, srv, nats.UserInfo("eraser", "pw"), nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
	cfg.SealBodies = true
	st, err := logstore.Open(context.Background(), nc, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &env{t: t, nc: nc, store: st}
}

// shredBarrier holds each of n shreds before its key's delete until all n
// are there (its hook, a fault hook): their purges go out together. An
// erase that fails calls abort, which lets the others go (it never gets
// there).
type shredBarrier struct {
	n       int
	mu      sync.Mutex
	waiting int
	all     chan struct{}
	aborted chan struct{}
	once    sync.Once
}

func newShredBarrier(n int) *shredBarrier {
	return &shredBarrier{n: n, all: make(chan struct{}), aborted: make(chan struct{})}
}

func (b *shredBarrier) hook(stage logstore.FaultStage) error {
	if stage != logstore.FaultShredKey {
		return nil
	}
	b.mu.Lock()
	ch := b.all
	if b.waiting++; b.waiting == b.n {
		b.waiting, b.all = 0, make(chan struct{})
		close(ch)
	}
	b.mu.Unlock()
	select {
	case <-ch:
	case <-b.aborted:
	}
	return nil
}

func (b *shredBarrier) abort() { b.once.Do(func() { close(b.aborted) }) }

// Two sealed sessions of two streams, erased at once by an eraser that may
// not purge: both purges are refused at the same moment on the one
// connection, and each erase learns of its own refusal, falls back to
// secure deletes and finishes. Before, each read the connection's last
// error, which could be the other stream's refusal: that erase took it for
// none, waited out its request's timeout and failed.
func TestPurgesRefusedAtOnce(t *testing.T) {
	bar := newShredBarrier(2)
	e := newNoPurgeEnv(t, logstore.Config{Partitions: 2, FaultHook: bar.hook})
	reg := prometheus.NewRegistry()
	svc, err := New(Config{Store: e.store, Conn: e.nc, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	const rounds = 24
	for round := range rounds {
		// Two sessions in different streams.
		var ids []string
		streams := map[string]bool{}
		for i := 0; len(ids) < 2; i++ {
			id := fmt.Sprintf("s-%d-%d", round, i)
			loc, err := e.store.Locate(id)
			if err != nil {
				t.Fatal(err)
			}
			if !streams[loc.Stream] {
				streams[loc.Stream] = true
				ids = append(ids, id)
			}
		}
		for _, id := range ids {
			e.eraseSession(id, strings.Repeat("R", 64), "")
			if !e.storedSealed(id) {
				t.Fatalf("%s is not sealed", id)
			}
		}
		errs := make([]error, len(ids))
		var wg sync.WaitGroup
		for i, id := range ids {
			wg.Go(func() {
				_, errs[i] = svc.Erase(context.Background(), EraseRequest{SessionID: id, Reason: "r", By: "b"})
				if errs[i] != nil {
					bar.abort()
				}
			})
		}
		wg.Wait()
		for i, id := range ids {
			if errs[i] != nil {
				t.Fatalf("round %d: erase %s: %v", round, id, errs[i])
			}
			e.gone(id)
			e.keyGone(id)
		}
	}
	c := e.store.ShredCounts()
	if c.PurgesRefused != 2*rounds || c.FallBacksDone != 2*rounds || c.Purged != 0 || c.PurgeErrors != 0 {
		t.Fatalf("shreds: %+v", c)
	}
	// The eraser's metrics say so: each session's sealed events went by
	// secure delete, six of its eight (the seal deleted the first and the
	// tail before the shred).
	want := map[string]float64{
		`sessionlog_eraser_purges_total{result="refused"}`:       2 * rounds,
		`sessionlog_eraser_purges_total{result="done"}`:          0,
		`sessionlog_eraser_purges_total{result="error"}`:         0,
		`sessionlog_eraser_purge_fallbacks_total{result="done"}`: 2 * rounds,
		`sessionlog_eraser_purge_fallbacks_total{result="cut"}`:  0,
		`sessionlog_eraser_fallback_secure_deletes_total`:        2 * rounds * 6,
	}
	if got := counters(t, reg); !maps.Equal(got, want) {
		t.Fatalf("metrics %v, want %v", got, want)
	}
}

// counters gathers the eraser's counters of reg, by name{labels}.
func counters(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if !strings.HasPrefix(mf.GetName(), "sessionlog_eraser_") {
			continue
		}
		for _, m := range mf.GetMetric() {
			name := mf.GetName()
			for _, l := range m.GetLabel() {
				name += fmt.Sprintf("{%s=%q}", l.GetName(), l.GetValue())
			}
			out[name] = m.GetCounter().GetValue()
		}
	}
	return out
}

// A sealed erase refused the purge and cut during its secure deletes (the
// eraser stopped: its context cancelled two deletes into the fall back)
// is resumed by another eraser, which finishes it with the record and the
// audit of an erase that was never cut: every event in the digest, every
// message deleted, the key gone. The metrics count a fall back cut and
// one done.
func TestPurgeFallBackCutAndResumed(t *testing.T) {
	e := newNoPurgeEnv(t, logstore.Config{})
	sum := e.eraseSession("s-cut", strings.Repeat("C", 64), "")
	cut, err := New(Config{Store: e.store, Conn: e.nc})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The seal deletes two, the key's delete is the third: the fall back's
	// deletes follow.
	var deletes atomic.Int64
	hook := func(step string) error {
		if step == StepDeleted && deletes.Add(1) == 5 {
			cancel()
		}
		return nil
	}
	cut.eraseStep.Store(&hook)
	req := EraseRequest{SessionID: "s-cut", Reason: "r", By: "b"}
	if got, err := cut.Erase(ctx, req); err == nil {
		t.Fatalf("the cut erase answered %+v", got)
	}
	rec, _, err := e.store.ErasureOf(context.Background(), "s-cut")
	if err != nil || rec == nil || rec.Done || !rec.Sealed || rec.Phase != logstore.ErasePhaseDeleting {
		t.Fatalf("record after the cut: %+v %v", rec, err)
	}
	if left, err := e.store.StoredPage(context.Background(), "s-cut", 100); err != nil || len(left) == 0 {
		t.Fatalf("the cut left no message to delete (%v): the test cut nothing", err)
	}

	reg := prometheus.NewRegistry()
	resumed, err := New(Config{Store: e.store, Conn: e.nc, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	got, err := resumed.Erase(context.Background(), req)
	if err != nil || got.State != EraseDone || got.Events != 8 || got.Jobs[0].Deleted != 8 || got.Jobs[0].Total != 8 {
		t.Fatalf("resumed: %+v %v", got, err)
	}
	e.gone("s-cut")
	e.keyGone("s-cut")
	rec, _, err = e.store.ErasureOf(context.Background(), "s-cut")
	if err != nil || !rec.Done || rec.Events != 8 || rec.LastSeq != 8 || rec.SHA256 != sum || rec.Unhashed != 0 || rec.Deleted != 8 || rec.Total != 8 {
		t.Fatalf("record %+v %v", rec, err)
	}
	recs := e.audits()
	if len(recs) != 1 || recs[0].SHA256 != sum || recs[0].Events != 8 || recs[0].LastSeq != 8 || recs[0].Unhashed != 0 {
		t.Fatalf("audit %+v, want 8 events, sha256 %s", recs, sum)
	}
	c := counters(t, reg)
	if c[`sessionlog_eraser_purges_total{result="refused"}`] != 2 || c[`sessionlog_eraser_purge_fallbacks_total{result="cut"}`] != 1 ||
		c[`sessionlog_eraser_purge_fallbacks_total{result="done"}`] != 1 {
		t.Fatalf("metrics %v", c)
	}
}
