package main

import (
	"path/filepath"

	"github.com/sessionlog/sessionlog/internal/assemble"
)

// The projector in `sessionlog up`: its store lives in <data-dir>/projector,
// its API and dashboard are mounted at "/" of the --http-listen mux (up
// serves /healthz, /readyz and /metrics and checks the token), and /readyz
// waits until it has caught up with the stream. The projector is given
// the token too: up's Require lets a cookie or ?token= through, and only
// the projector's action check (httpauth.Action) asks for the token in
// the Authorization header, which it can do only when it knows it.
func startUpProjector(env *upEnv) (*upActor, error) {
	cfg := assemble.DefaultProjector(filepath.Join(env.DataDir, "projector"))
	cfg.OTLPEndpoint = env.OTLPEndpoint
	cfg.HTTPToken = env.HTTPToken
	svc, err := assemble.NewProjector(cfg, env.Store, assemble.Deps{Conn: env.NC, Logger: env.Logger, Registerer: env.Registry})
	if err != nil {
		return nil, err
	}
	env.Mux.Handle("/", svc.APIHandler())
	env.AddReady("projector", svc.Ready)
	exec, interrupt := serviceActor(env.Ctx, svc.Run)
	return &upActor{Execute: exec, Interrupt: interrupt}, nil
}
