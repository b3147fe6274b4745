package main

import (
	"github.com/sessionlog/sessionlog/internal/assemble"
)

// The projector in `sessionlog up`: its store lives in <data-dir>/projector,
// its API and dashboard are mounted at "/" of the --http-listen mux (up
// serves /healthz, /readyz and /metrics and checks the token), and /readyz
// waits until it has caught up with the stream. The projector is given
// the token too, so its own check and its action check (httpauth.Action)
// take the operator's token, from the Authorization header only, as up's
// does.
func startUpProjector(env *upEnv) (*upActor, error) {
	cfg := env.Configs.Projector
	d := assemble.Deps{Conn: env.NC, Logger: env.Logger, Registerer: env.Registry}
	// With an --http-token, whoever holds it is the operator: the
	// dashboard's erase goes out as up's eraser user. Without one the
	// dashboard cannot erase (sessionlog erase still can).
	if cfg.HTTPToken != "" {
		op, err := env.ConnectEraser("sessionlog-up-projector-erase")
		if err != nil {
			return nil, err
		}
		d.Operator = op
	}
	svc, err := assemble.NewProjector(cfg, env.Store, d)
	if err != nil {
		return nil, err
	}
	env.Mux.Handle("/", svc.APIHandler())
	env.AddReady("projector", svc.Ready)
	exec, interrupt := serviceActor(env.Ctx, svc.Run)
	return &upActor{Execute: exec, Interrupt: interrupt}, nil
}
