package sre

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// Ls prints every session with its last event (at most limit of them,
// when limit > 0), as a table or as JSON lines.
func Ls(ctx context.Context, st *logstore.Store, asJSON bool, limit int, stdout, stderr io.Writer) (err error) {
	refs, err := ListSessions(ctx, st)
	if err != nil {
		return err
	}
	if limit > 0 && len(refs) > limit {
		fmt.Fprintf(stderr, "sessionlog ls: %d sessions, the first %d listed (--limit 0 lists all)\n", len(refs), limit)
		refs = refs[:limit]
	}
	tw := tabwriter.NewWriter(stdout, 0, 8, 2, ' ', 0)
	if !asJSON {
		fmt.Fprintln(tw, "SESSION\tEVENTS\tLAST SEQ\tLAST TYPE\tLAST TIME")
	}
	enc := json.NewEncoder(stdout)
	for _, r := range refs {
		le := lastEvent{SessionID: r.ID, Events: r.Events}
		if err := lastOf(ctx, st, r, &le); err != nil {
			return err
		}
		if asJSON {
			if err := enc.Encode(le); err != nil {
				return err
			}
			continue
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\n", le.SessionID, le.Events, le.LastSeq, le.LastType, le.LastTime.UTC().Format(time.RFC3339))
	}
	if !asJSON {
		return tw.Flush()
	}
	return nil
}

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

// lastOf fills the last event of a session from its headers (and body for
// the time).
func lastOf(ctx context.Context, st *logstore.Store, r SessionRef, le *lastEvent) error {
	m, err := st.LastStoredOf(ctx, r.ID)
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
