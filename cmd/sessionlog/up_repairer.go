package main

import (
	"github.com/sessionlog/sessionlog/internal/assemble"
)

// The repairer in `sessionlog up`: --lease-ttl and --grace come from up's flags.
func startUpRepairer(env *upEnv) (*upActor, error) {
	cfg := assemble.DefaultRepairer()
	cfg.LeaseTTL, cfg.Grace = env.LeaseTTL, env.Grace
	svc, err := assemble.NewRepairer(cfg, env.Store, assemble.Deps{Conn: env.NC, Logger: env.Logger, Registerer: env.Registry})
	if err != nil {
		return nil, err
	}
	env.AddReady("repairer", svc.Ready)
	exec, interrupt := serviceActor(env.Ctx, svc.Run)
	return &upActor{Execute: exec, Interrupt: interrupt}, nil
}
