package main

import (
	"github.com/sessionlog/sessionlog/internal/assemble"
)

// The eraser in `sessionlog up` (sessions.api.erase, erase jobs and
// retention): --retain-closed and --archive-dir come from up's flags. It
// logs in as the user that may erase, the repairer's (deploy/nats is
// unchanged), on a connection of its own.
func startUpEraser(env *upEnv) (*upActor, error) {
	nc, st, err := ownStore(env, env.ConnectEraser, "sessionlog-up-eraser")
	if err != nil {
		return nil, err
	}
	svc, err := assemble.NewEraser(env.Configs.Eraser, st, assemble.Deps{Conn: nc, Logger: env.Logger, Registerer: env.Registry})
	if err != nil {
		return nil, err
	}
	env.AddReady("eraser", svc.Ready)
	exec, interrupt := serviceActor(env.Ctx, svc.Run)
	return &upActor{Execute: exec, Interrupt: interrupt}, nil
}
