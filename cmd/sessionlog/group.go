package main

import (
	"context"
	"errors"
	"log/slog"
	"syscall"

	"github.com/oklog/run"
)

// runGroup adds the signal actor (SIGINT, SIGTERM) last and runs g. A
// signal is a clean stop, not an error.
func runGroup(ctx context.Context, g *run.Group, log *slog.Logger) error {
	g.Add(run.SignalHandler(ctx, syscall.SIGINT, syscall.SIGTERM))
	err := g.Run()
	switch {
	case errors.Is(err, run.ErrSignal):
		log.Info("stopped", "reason", err.Error())
		return nil
	case errors.Is(err, context.Canceled):
		return nil
	}
	return err
}

// serviceActor runs a service's Run(ctx) as an actor: the interrupt cancels
// exactly that service's context.
func serviceActor(parent context.Context, runFn func(context.Context) error) (func() error, func(error)) {
	ctx, cancel := context.WithCancel(parent)
	return func() error { return runFn(ctx) }, func(error) { cancel() }
}
