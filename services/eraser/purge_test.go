package eraser

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

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

// atShredKey is a fault hook that holds each of n shreds before its key's
// delete until all n are there: their purges go out together.
func atShredKey(n int) func(logstore.FaultStage) error {
	var mu sync.Mutex
	var all chan struct{}
	waiting := 0
	return func(stage logstore.FaultStage) error {
		if stage != logstore.FaultShredKey {
			return nil
		}
		mu.Lock()
		if waiting == 0 {
			all = make(chan struct{})
		}
		ch := all
		if waiting++; waiting == n {
			waiting = 0
			close(ch)
		}
		mu.Unlock()
		<-ch
		return nil
	}
}

// Two sealed sessions of two streams, erased at once by an eraser that may
// not purge: both purges are refused at the same moment on the one
// connection, and each erase learns of its own refusal, falls back to
// secure deletes and finishes. Before, each read the connection's last
// error, which could be the other stream's refusal: that erase took it for
// none, waited out its request's timeout and failed.
func TestPurgesRefusedAtOnce(t *testing.T) {
	hook := atShredKey(2)
	e := newNoPurgeEnv(t, logstore.Config{Partitions: 2, FaultHook: hook})
	svc, err := New(Config{Store: e.store, Conn: e.nc})
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
}
