package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/sessionlog/sessionlog/pkg/api"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// runErase asks the repairer to erase a session for good (DESIGN.md
// section 14, sessions.api.erase; only the operator's NATS user may).
func runErase(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	fs := newFlags("erase")
	fs.SetOutput(stderr)
	nf := addNATSFlags(fs)
	reason := fs.String("reason", "", "why the session is erased (kept in the audit record; required)")
	by := fs.String("by", "", "who erases it (kept in the audit record; default the NATS user, else $USER)")
	cascade := fs.Bool("cascade", false, "also erase every session forked from it, and their forks; without it forks keep their copies")
	nf.addTimeoutFlag(fs, 5*time.Minute)
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
	if strings.TrimSpace(*reason) == "" {
		return usageErrorf("--reason is required: it is kept in the audit record")
	}
	if *by == "" {
		*by = nf.User
	}
	if *by == "" {
		*by = os.Getenv("USER")
	}
	if *by == "" {
		*by = "operator"
	}
	v, err := nf.openVerb(ctx, "erase", fs, stderr)
	if err != nil {
		return err
	}
	defer v.close()
	ctx, nc := v.ctx, v.nc
	defer func() { err = verbError(ctx, err) }()
	body, _ := json.Marshal(api.EraseRequest{SessionID: id, Reason: *reason, By: *by, Cascade: *cascade})
	var reply api.EraseReply
	if done, err := operatorRequest(ctx, nc, api.SubjectErase, body, "erase",
		", or this user may not erase; an erase cut short is finished by running it again", *jsonOut, stdout, &reply); done || err != nil {
		return err
	}
	fmt.Fprintf(stdout, "erased %s (%d events)\n", strings.Join(reply.Erased, ", "), reply.Events)
	return nil
}
