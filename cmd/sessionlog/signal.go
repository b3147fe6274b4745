package main

import (
	"context"
	"os/signal"
	"syscall"
)

// signalContext ends ctx on SIGINT or SIGTERM, for verbs that run until
// stopped (tail) without an actor group.
func signalContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
}
