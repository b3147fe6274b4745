package sre

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/internal/wire"
	"github.com/sessionlog/sessionlog/pkg/api"
)

// repair and erase read a refusal the same way: its code and message as
// the error, the body as it came with --json; with nothing answering they
// name the service that is not running.
func TestOperatorRefusalIsCodeAndMessage(t *testing.T) {
	s := natstest.RunServer(t)
	nc := natstest.Connect(t, s)
	ctx := context.Background()
	verbs := []struct {
		subject, server string
		run             func(jsonOut bool, stdout *bytes.Buffer) error
	}{
		{api.SubjectRepair, "repairer", func(jsonOut bool, stdout *bytes.Buffer) error {
			return Repair(ctx, nc, "s-1", false, jsonOut, stdout)
		}},
		{api.SubjectErase, "eraser", func(jsonOut bool, stdout *bytes.Buffer) error {
			return Erase(ctx, nc, "s-1", "test", "op", false, true, "never", jsonOut, stdout, &bytes.Buffer{})
		}},
	}
	for _, v := range verbs {
		var out bytes.Buffer
		if err := v.run(false, &out); err == nil || !strings.Contains(err.Error(), "no "+v.server+" is running") {
			t.Errorf("%s with nothing answering: %v", v.subject, err)
		}
		sub, err := nc.Subscribe(v.subject, func(m *nats.Msg) {
			_ = nc.PublishMsg(wire.ErrorMsg(m.Reply, wire.ErrorDetail{Code: api.CodeForbidden, Message: "not this user"}))
		})
		if err != nil {
			t.Fatal(err)
		}
		for _, jsonOut := range []bool{false, true} {
			out.Reset()
			err := v.run(jsonOut, &out)
			if err == nil || err.Error() != "forbidden: not this user" {
				t.Errorf("%s refused: error %v, want forbidden: not this user", v.subject, err)
			}
			if printed := strings.Contains(out.String(), `"code":"forbidden"`); printed != jsonOut {
				t.Errorf("%s refused, --json %v: printed %q", v.subject, jsonOut, out.String())
			}
		}
		if err := sub.Unsubscribe(); err != nil {
			t.Fatal(err)
		}
	}
}
