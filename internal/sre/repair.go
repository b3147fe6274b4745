package sre

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/nats-io/nats.go"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/pkg/api"
	"github.com/sessionlog/sessionlog/services/repairer"
)

// Repair asks the repairer to repair session id (force: even under a
// live lease) and prints its reply, as lines or as it came (jsonOut).
func Repair(ctx context.Context, nc *nats.Conn, id string, force, jsonOut bool, stdout io.Writer) (err error) {
	body, _ := json.Marshal(repairer.RepairRequest{SessionID: id, Force: force})
	var reply repairer.RepairReply
	raw, err := operatorRequest(ctx, nc, logstore.SubjectRepair, body, "repairer", "repair", "", jsonOut, stdout, &reply)
	if err != nil {
		return err
	}
	if jsonOut {
		fmt.Fprintf(stdout, "%s\n", raw)
		return nil
	}
	if !reply.Repaired {
		fmt.Fprintf(stdout, "%s: nothing to repair\n", id)
		return nil
	}
	fmt.Fprintf(stdout, "%s: repaired, seqs %d..%d, closed %d item(s)\n", id, reply.FirstSeq, reply.LastSeq, len(reply.Closed))
	for _, c := range reply.Closed {
		if c.TurnID != "" && c.Kind != "turn" {
			fmt.Fprintf(stdout, "  %s %s (turn %s)\n", c.Kind, c.ID, c.TurnID)
		} else {
			fmt.Fprintf(stdout, "  %s %s\n", c.Kind, c.ID)
		}
	}
	fmt.Fprintf(stdout, "the session is paused until session/resumed is appended\n")
	return nil
}

// operatorRequest sends an operator's request to a service (server: the
// repairer, the eraser) and decodes its reply into out, which it returns
// as it came. A refusal ({"error":{...}}) is the error "code: message",
// printed as it came with jsonOut. hint ends the message of a request
// that got no answer.
func operatorRequest(ctx context.Context, nc *nats.Conn, subject string, body []byte, server, what, hint string,
	jsonOut bool, stdout io.Writer, out any) ([]byte, error) {
	m, err := nc.RequestWithContext(ctx, subject, body)
	if errors.Is(err, nats.ErrNoResponders) {
		return nil, fmt.Errorf("no %s is running (nothing answers %s)%s", server, subject, hint)
	}
	if err != nil {
		return nil, fmt.Errorf("%s request%s: %w", what, hint, err)
	}
	var eb api.ErrorBody
	if json.Unmarshal(m.Data, &eb) == nil && eb.Error.Code != "" {
		if jsonOut {
			fmt.Fprintf(stdout, "%s\n", m.Data)
		}
		return nil, fmt.Errorf("%s: %s", eb.Error.Code, eb.Error.Message)
	}
	if err := json.Unmarshal(m.Data, out); err != nil {
		return nil, fmt.Errorf("%s reply %q: %w", what, m.Data, err)
	}
	return m.Data, nil
}
