// Package writertest runs, for tests of the agents' side (ship, import,
// the log adapter), the writer and the source service on an embedded
// NATS server, as `sessionlog up` runs them.
package writertest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sessionlog/sessionlog/internal/assemble"
	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/pkg/client"
)

// Stack is an embedded server with the writer and the source service.
type Stack struct {
	St  *logstore.Store
	NC  *nats.Conn
	Cl  *client.Client // on a connection of its own
	URL string
}

// New starts a Stack whose store is opened with cfg (its leases lasting
// cfg.LeaseTTL, or the default).
func New(t testing.TB, cfg logstore.Config) *Stack {
	t.Helper()
	s := natstest.RunServer(t)
	nc := natstest.Connect(t, s)
	st, err := logstore.Open(context.Background(), nc, cfg)
	if err != nil {
		t.Fatal(err)
	}
	Start(t, st, nc)
	return &Stack{St: st, NC: nc, Cl: client.New(natstest.Connect(t, s)), URL: s.ClientURL()}
}

// Service is a service Run runs.
type Service interface {
	Run(ctx context.Context) error
	Ready() error
}

// Start runs the writer on st (its leases lasting the store's lease
// TTL), and the source service beside it, until the test ends.
func Start(t testing.TB, st *logstore.Store, nc *nats.Conn) {
	t.Helper()
	cfg := assemble.DefaultWriter()
	cfg.LeaseTTL = st.Config().LeaseTTL
	w, err := assemble.NewWriter(cfg, st, assemble.Deps{Conn: nc})
	if err != nil {
		t.Fatal(err)
	}
	src, err := assemble.NewSource(assemble.DefaultSource(), st, assemble.Deps{Conn: nc})
	if err != nil {
		t.Fatal(err)
	}
	for _, svc := range []Service{w, src} {
		Run(t, svc)
	}
}

// Run runs svc until stop is called or the test ends; stop returns what
// Run returned.
func Run(t testing.TB, svc Service) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() { cancel(); err = <-done })
		return err
	}
	t.Cleanup(func() { _ = stop() })
	natstest.CheckFor(t, 10*time.Second, 10*time.Millisecond, svc.Ready)
	return stop
}
