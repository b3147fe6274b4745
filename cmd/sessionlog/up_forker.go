package main

import (
	"github.com/sessionlog/sessionlog/internal/assemble"
)

// The forker in `sessionlog up`, with its defaults.
func startUpForker(env *upEnv) (*upActor, error) {
	svc, err := assemble.NewForker(env.Configs.Forker, env.Store, assemble.Deps{Conn: env.NC, Logger: env.Logger, Registerer: env.Registry})
	if err != nil {
		return nil, err
	}
	env.AddReady("forker", svc.Ready)
	exec, interrupt := serviceActor(env.Ctx, svc.Run)
	return &upActor{Execute: exec, Interrupt: interrupt}, nil
}
