package main

import (
	"fmt"

	"github.com/nats-io/nats.go"

	"github.com/sessionlog/sessionlog/internal/assemble"
	"github.com/sessionlog/sessionlog/internal/logstore"
)

// The writer in `sessionlog up`: sessions.api.append and
// sessions.api.heartbeat on the embedded server. It starts first so agents
// can append as soon as the process is ready.
func startUpWriter(env *upEnv) (*upActor, error) {
	// A connection of its own: the append path's requests, publishes
	// and answers do not queue behind the projector's deliveries.
	nc, st, err := ownStore(env, env.Connect, "sessionlog-writer")
	if err != nil {
		return nil, err
	}
	svc, err := assemble.NewWriter(env.Configs.Writer, st, assemble.Deps{Conn: nc, Logger: env.Logger, Registerer: env.Registry})
	if err != nil {
		return nil, err
	}
	env.AddReady("writer", svc.Ready)
	exec, interrupt := serviceActor(env.Ctx, svc.Run)
	return &upActor{Execute: exec, Interrupt: interrupt}, nil
}

// ownStore opens a connection of its own with connect (as name) and a
// store on it, for a service of up; up's store provisioned the stream
// and buckets already.
func ownStore(env *upEnv, connect func(name string) (*nats.Conn, error), name string) (*nats.Conn, *logstore.Store, error) {
	nc, err := connect(name)
	if err != nil {
		return nil, nil, err
	}
	cfg := env.Store.Config()
	cfg.NoProvision = true
	st, err := logstore.Open(env.Ctx, nc, cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: log store: %w", name, err)
	}
	return nc, st, nil
}
