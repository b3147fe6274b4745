package main

import (
	"github.com/sessionlog/sessionlog/services/writer"
)

// The writer in `sessionlog up`: sessions.api.append and
// sessions.api.heartbeat on the embedded server. It starts first so agents
// can append as soon as the process is ready.
func init() {
	registerUp(upService{Name: "writer", Order: 10, Start: func(env *upEnv) (*upActor, error) {
		svc, err := writer.New(writer.Config{
			Store: env.Store, Logger: env.Logger, Registerer: env.Registry, LeaseTTL: env.LeaseTTL,
		})
		if err != nil {
			return nil, err
		}
		env.AddReady("writer", svc.Ready)
		exec, interrupt := serviceActor(env.Ctx, svc.Run)
		return &upActor{Execute: exec, Interrupt: interrupt}, nil
	}})
}
