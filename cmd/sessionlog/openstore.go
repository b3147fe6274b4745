package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sessionlog/sessionlog/internal/logstore"
)

// openStoreTimeout bounds how long a service waits for JetStream at start
// (a pod can start before the cluster has a meta leader).
const openStoreTimeout = 30 * time.Second

// openStore opens the JetStream adapter, retrying while JetStream is not
// available yet (any error but a partition count other than the store's),
// for at most openStoreTimeout.
func openStore(ctx context.Context, nc *nats.Conn, cfg logstore.Config) (*logstore.Store, error) {
	ctx, cancel := context.WithTimeout(ctx, openStoreTimeout)
	defer cancel()
	notPartitions := func(err error) bool {
		var pe *logstore.PartitionsError
		return !errors.As(err, &pe) // another count than the store's: never retried
	}
	warn := func(err error) {
		if cfg.Logger != nil {
			cfg.Logger.Warn("opening the log store", "err", err)
		}
	}
	st, err := logstore.RetryWhile(ctx, 0, notPartitions, warn, func(ctx context.Context) (*logstore.Store, error) {
		keepReplicas(ctx, nc, &cfg)
		return logstore.Open(ctx, nc, cfg)
	})
	if err != nil && ctx.Err() != nil {
		return nil, fmt.Errorf("open log store: %w", err)
	}
	return st, err
}

// keepReplicas never lets a process lower the replicas of an existing
// stream: a service started with the default --replicas 1 against an R3
// cluster would otherwise turn the log into a single copy.
func keepReplicas(ctx context.Context, nc *nats.Conn, cfg *logstore.Config) {
	if cfg.NoProvision {
		return
	}
	for name, have := range logstore.ProvisionedReplicas(ctx, nc, cfg.Partitions) {
		if have > cfg.Replicas {
			if cfg.Logger != nil {
				cfg.Logger.Warn("keeping the stream's replicas", "stream", name, "replicas", have, "asked", cfg.Replicas)
			}
			cfg.Replicas = have
		}
	}
}
