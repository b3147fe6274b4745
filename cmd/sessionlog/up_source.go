package main

import (
	"github.com/sessionlog/sessionlog/internal/assemble"
)

// The source service in `sessionlog up` (sessions.api.source.*): it reads
// and appends through the writer. It logs in as the services' user, the
// writer's, which served these endpoints before (deploy/nats is
// unchanged), on a connection of its own.
func startUpSource(env *upEnv) (*upActor, error) {
	nc, st, err := ownStore(env, env.Connect, "sessionlog-source")
	if err != nil {
		return nil, err
	}
	svc, err := assemble.NewSource(env.Configs.Source, st, assemble.Deps{Conn: nc, Logger: env.Logger, Registerer: env.Registry})
	if err != nil {
		return nil, err
	}
	env.AddReady("source", svc.Ready)
	exec, interrupt := serviceActor(env.Ctx, svc.Run)
	return &upActor{Execute: exec, Interrupt: interrupt}, nil
}
