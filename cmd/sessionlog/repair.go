package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/services/repairer"
)

func runRepair(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	fs := newFlags("repair")
	fs.SetOutput(stderr)
	nf := addNATSFlags(fs)
	force := fs.Bool("force", false, "repair even if a holder's lease is live (the holder's next append is refused: paused)")
	nf.addTimeoutFlag(fs, 30*time.Second)
	jsonOut := fs.Bool("json", false, "print the reply as JSON")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageErrorf("want exactly one session id, got %d arguments", fs.NArg())
	}
	id := fs.Arg(0)
	if !schema.ValidSessionID(id) {
		return usageErrorf("session id %q must match ^[A-Za-z0-9_-]{1,128}$", id)
	}
	log, err := newLogger(fs, stderr)
	if err != nil {
		return err
	}
	nf.Log = log
	ctx, cancel := nf.verbContext(ctx, "repair")
	defer cancel()
	defer func() { err = verbError(ctx, err) }()
	nc, err := nf.connect("sessionlog-repair")
	if err != nil {
		return err
	}
	defer nc.Close()
	body, _ := json.Marshal(repairer.RepairRequest{SessionID: id, Force: *force})
	m, err := nc.RequestWithContext(ctx, logstore.SubjectRepair, body)
	if errors.Is(err, nats.ErrNoResponders) {
		return fmt.Errorf("no repairer is running (nothing answers %s)", logstore.SubjectRepair)
	}
	if err != nil {
		return fmt.Errorf("repair request: %w", err)
	}
	var eb repairer.ErrorBody
	if json.Unmarshal(m.Data, &eb) == nil && eb.Error.Code != "" {
		if *jsonOut {
			fmt.Fprintf(stdout, "%s\n", m.Data)
		}
		return fmt.Errorf("%s: %s", eb.Error.Code, eb.Error.Message)
	}
	var reply repairer.RepairReply
	if err := json.Unmarshal(m.Data, &reply); err != nil {
		return fmt.Errorf("repair reply %q: %w", m.Data, err)
	}
	if *jsonOut {
		fmt.Fprintf(stdout, "%s\n", m.Data)
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
