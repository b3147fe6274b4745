package main

import (
	"github.com/sessionlog/sessionlog/internal/assemble"
	"github.com/sessionlog/sessionlog/internal/logstore"
)

// The repairer in `sessionlog up`: --lease-ttl, --grace, --retain-closed
// and --archive-dir come from up's flags. It has a connection and a store
// of its own, as the user that may erase (sessions.api.erase, retention).
func startUpRepairer(env *upEnv) (*upActor, error) {
	cfg := assemble.DefaultRepairer()
	cfg.LeaseTTL, cfg.Grace = env.LeaseTTL, env.Grace
	cfg.RetainClosed, cfg.ArchiveDir = env.RetainClosed, env.ArchiveDir
	nc, err := env.ConnectEraser("sessionlog-up-repairer")
	if err != nil {
		return nil, err
	}
	scfg := env.Store.Config()
	scfg.NoProvision = true
	st, err := logstore.Open(env.Ctx, nc, scfg)
	if err != nil {
		return nil, err
	}
	svc, err := assemble.NewRepairer(cfg, st, assemble.Deps{Conn: nc, Logger: env.Logger, Registerer: env.Registry})
	if err != nil {
		return nil, err
	}
	env.AddReady("repairer", svc.Ready)
	exec, interrupt := serviceActor(env.Ctx, svc.Run)
	return &upActor{Execute: exec, Interrupt: interrupt}, nil
}
