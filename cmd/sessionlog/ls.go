package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/sre"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// `sessionlog ls`: every session with its last event.

// lastEvent is the summary `ls` prints per session (the table gives the
// time to the second, JSON to the nanosecond).
type lastEvent struct {
	SessionID string    `json:"sessionId"`
	Events    uint64    `json:"events"`
	LastSeq   uint64    `json:"lastSeq"`
	LastType  string    `json:"lastType"`
	LastTime  time.Time `json:"lastTime"`
	StreamSeq uint64    `json:"streamSeq"`
}

func runLs(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	fs, nf := sreFlags("ls", stderr)
	asJSON := fs.Bool("json", false, "print JSON lines instead of a table")
	limit := fs.Int("limit", 0, "print at most this many sessions, in id order (0: all); the rest are counted on stderr")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *limit < 0 {
		return usageErrorf("--limit %d: want 0 (all) or more", *limit)
	}
	if fs.NArg() > 0 {
		return usageErrorf("ls takes no arguments")
	}
	c, err := openSRE(ctx, "ls", fs, nf, stderr)
	if err != nil {
		return err
	}
	defer c.close()
	defer func() { err = c.explain(err) }()
	ctx = c.ctx
	refs, err := sre.ListSessions(ctx, c.store)
	if err != nil {
		return err
	}
	if *limit > 0 && len(refs) > *limit {
		fmt.Fprintf(stderr, "sessionlog ls: %d sessions, the first %d listed (--limit 0 lists all)\n", len(refs), *limit)
		refs = refs[:*limit]
	}
	tw := tabwriter.NewWriter(stdout, 0, 8, 2, ' ', 0)
	if !*asJSON {
		fmt.Fprintln(tw, "SESSION\tEVENTS\tLAST SEQ\tLAST TYPE\tLAST TIME")
	}
	enc := json.NewEncoder(stdout)
	for _, r := range refs {
		le := lastEvent{SessionID: r.ID, Events: r.Events}
		if err := c.lastOf(ctx, r, &le); err != nil {
			return err
		}
		if *asJSON {
			if err := enc.Encode(le); err != nil {
				return err
			}
			continue
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\n", le.SessionID, le.Events, le.LastSeq, le.LastType, le.LastTime.UTC().Format(time.RFC3339))
	}
	if !*asJSON {
		return tw.Flush()
	}
	return nil
}

// lastOf fills the last event of a session from its headers (and body for
// the time).
func (c *sreConn) lastOf(ctx context.Context, r sre.SessionRef, le *lastEvent) error {
	m, err := c.store.LastStoredOf(ctx, r.ID)
	if err != nil {
		return fmt.Errorf("last event of %s: %w", r.ID, err)
	}
	le.StreamSeq = m.StreamSeq
	le.LastType = m.Header.Get(logstore.HeaderType)
	le.LastSeq, _ = strconv.ParseUint(m.Header.Get(logstore.HeaderSeq), 10, 64)
	le.LastTime = m.Stored
	if e, err := schema.Decode(m.Data); err == nil {
		le.LastTime, le.LastType, le.LastSeq = e.Time, e.Type, e.Seq
	}
	return nil
}
