package main

import (
	"context"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
)

// layoutStore starts the servers of layout l and provisions a store of its
// partitions with a replica on each of its nodes, every stream led and
// current: what a verb under test then reads through d.URL.
func layoutStore(t *testing.T, l natstest.Layout) (*natstest.Deployment, *nats.Conn, *logstore.Store) {
	t.Helper()
	d := natstest.RunLayout(t, l)
	nc := d.Connect()
	st, err := logstore.Open(context.Background(), nc, logstore.Config{Partitions: l.Partitions, Replicas: l.Replicas()})
	if err != nil {
		t.Fatal(err)
	}
	d.WaitLeaders(nc)
	return d, nc, st
}
