package sre

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/pkg/session"
)

// Show prints session id's folded state and lease, as a table or as
// JSON.
func Show(ctx context.Context, store *logstore.Store, id string, asJSON bool, stdout io.Writer) (err error) {
	st := session.New(id)
	var foldErr error
	tail, err := ReadValid(ctx, store, id, func(m *logstore.Msg, e *schema.Envelope) error {
		if err := st.Apply(e); err != nil {
			foldErr = &ReadProblem{Kind: ProbUnreadable, StreamSeq: m.StreamSeq, AfterSeq: st.LastSeq, Err: err}
			return logstore.ErrStop
		}
		return nil
	})
	var rp *ReadProblem
	if errors.As(err, &rp) {
		foldErr, err = rp, nil
	}
	if err != nil {
		return err
	}
	if !tail.Exists() {
		return Missing(ctx, store, id)
	}
	lease, _, lerr := store.GetLease(ctx, id)
	if asJSON {
		state, err := showState(st)
		if err != nil {
			return err
		}
		open := st.OpenWork()
		if open == nil {
			open = []session.OpenItem{}
		}
		out := map[string]any{"state": state, "openWork": open, "status": showStatus(st, foldErr), "streamSeq": tail.StreamSeq}
		if lease != nil {
			out["lease"] = lease
		}
		if foldErr != nil {
			out["error"] = foldErr.Error()
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(out); err != nil {
			return err
		}
	} else {
		printState(stdout, st, tail, foldErr, lease, lerr)
	}
	if foldErr != nil {
		return fmt.Errorf("session %s is %s: %w", id, showStatus(st, foldErr), foldErr)
	}
	return nil
}

// StateInternals are the keys of a folded state's JSON that only the
// rules read back (the hashes of spent ids, kept so a snapshot restores
// them): show --json is for people and scripts, who get the state without
// them.
var StateInternals = []string{"usedTurnHashes", "spentToolSeqs", "spentApprovalSeqs", "usedTurns", "spentTools", "spentApprovals"}

// showState is st's JSON without StateInternals.
func showState(st *session.State) (map[string]json.RawMessage, error) {
	b, err := json.Marshal(st)
	if err != nil {
		return nil, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	for _, k := range StateInternals {
		delete(m, k)
	}
	return m, nil
}

func showStatus(st *session.State, foldErr error) string {
	var rp *ReadProblem
	switch {
	case errors.As(foldErr, &rp):
		return string(rp.Kind)
	case foldErr != nil:
		return "unreadable"
	case st.Closed:
		return "closed"
	case st.Forking:
		return "forking"
	case st.Paused:
		return "paused"
	case st.HasOpenWork():
		return "active"
	}
	return "idle"
}

func printState(w io.Writer, st *session.State, tail logstore.Tail, foldErr error, lease *logstore.Lease, leaseErr error) {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	defer tw.Flush()
	fmt.Fprintf(tw, "session\t%s\n", st.SessionID)
	fmt.Fprintf(tw, "status\t%s\n", showStatus(st, foldErr))
	fmt.Fprintf(tw, "last seq\t%d (stream seq %d, event %s, %s)\n", st.LastSeq, tail.StreamSeq, st.LastEventID, st.LastTime.UTC().Format(time.RFC3339Nano))
	if foldErr != nil {
		fmt.Fprintf(tw, "error\t%v\n", foldErr)
	}
	if st.Meta.Title != "" {
		fmt.Fprintf(tw, "title\t%s\n", st.Meta.Title)
	}
	if st.Meta.Agent != "" {
		fmt.Fprintf(tw, "agent\t%s\n", st.Meta.Agent)
	}
	if p := st.Meta.Parent; p != nil {
		fmt.Fprintf(tw, "parent\t%s at seq %d (depth %d)\n", p.SessionID, p.SeedLength, p.Depth)
	}
	if st.Paused {
		fmt.Fprintf(tw, "paused\t%s\n", st.PauseReason)
	}
	if st.Closed {
		fmt.Fprintf(tw, "closed\t%s\n", st.CloseReason)
	}
	fmt.Fprintf(tw, "turns\t%d\n", st.Turns)
	if st.Turn != nil {
		fmt.Fprintf(tw, "open turn\t%s since seq %d\n", st.Turn.ID, st.Turn.StartSeq)
	}
	for _, it := range st.OpenWork() {
		fmt.Fprintf(tw, "open\t%s %s (turn %s, since seq %d)\n", it.Kind, it.ID, it.TurnID, it.StartSeq)
	}
	if g := st.Goal; g != nil {
		fmt.Fprintf(tw, "goal\trevision %d, %s: %s\n", g.Revision, g.Status, oneLine(g.Objective, 100))
	}
	if st.Repairs > 0 {
		fmt.Fprintf(tw, "repairs\t%d (last at seq %d)\n", st.Repairs, st.LastRepairSeq)
	}
	switch {
	case leaseErr != nil:
		fmt.Fprintf(tw, "lease\t(unknown: %v)\n", leaseErr)
	case lease != nil:
		fmt.Fprintf(tw, "lease\t%s, renewed %s\n", lease.Holder, lease.RenewedAt.UTC().Format(time.RFC3339Nano))
	default:
		fmt.Fprintf(tw, "lease\tnone\n")
	}
}

// oneLine folds text onto one line of at most max bytes for log and
// table output.
func oneLine(s string, max int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > max {
		return schema.Clip(s, max-3)
	}
	return s
}
