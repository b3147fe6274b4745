package main

import (
	"github.com/sessionlog/sessionlog/services/repairer"
)

// The repairer in `sessionlog up`: --lease-ttl and --grace come from up's flags.
func startUpRepairer(env *upEnv) (*upActor, error) {
	svc, err := repairer.New(repairer.Config{
		Store: env.Store, Logger: env.Logger, Registerer: env.Registry,
		LeaseTTL: env.LeaseTTL, Grace: env.Grace,
	})
	if err != nil {
		return nil, err
	}
	env.AddReady("repairer", svc.Ready)
	exec, interrupt := serviceActor(env.Ctx, svc.Run)
	return &upActor{Execute: exec, Interrupt: interrupt}, nil
}
