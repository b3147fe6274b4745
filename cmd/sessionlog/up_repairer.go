package main

import (
	"github.com/sessionlog/sessionlog/internal/assemble"
)

// The repairer in `sessionlog up`: --lease-ttl and --grace come from up's
// flags. It has a connection and a store of its own, as the user that may
// erase, which it was while it served erasure (deploy/nats is unchanged:
// the repairer keeps its user, and the eraser takes the same).
func startUpRepairer(env *upEnv) (*upActor, error) {
	nc, st, err := ownStore(env, env.ConnectEraser, "sessionlog-up-repairer")
	if err != nil {
		return nil, err
	}
	svc, err := assemble.NewRepairer(env.Configs.Repairer, st, assemble.Deps{Conn: nc, Logger: env.Logger, Registerer: env.Registry})
	if err != nil {
		return nil, err
	}
	env.AddReady("repairer", svc.Ready)
	exec, interrupt := serviceActor(env.Ctx, svc.Run)
	return &upActor{Execute: exec, Interrupt: interrupt}, nil
}
