package sre

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/schollz/progressbar/v3"

	"github.com/sessionlog/sessionlog/internal/progress"
	"github.com/sessionlog/sessionlog/pkg/api"
)

// Erase asks the eraser to erase session id for good (DESIGN.md section
// 14, sessions.api.erase) and, with wait, follows the erase until it is
// done, with a progress bar on stderr (progressFlag: auto, always or
// never); it prints the last reply, as a line or as it came (jsonOut).
func Erase(ctx context.Context, nc *nats.Conn, id, reason, by string, cascade, wait bool, progressFlag string, jsonOut bool, stdout, stderr io.Writer) (err error) {
	body, _ := json.Marshal(api.EraseRequest{SessionID: id, Reason: reason, By: by, Cascade: cascade})
	// The request is answered at once (accepted, or done for a small
	// erase); the same request again answers where the jobs stand, from
	// their records, so following an erase needs no long reply window.
	const hint = ", or this user may not erase; an accepted erase goes on by itself"
	var bar *progressbar.ProgressBar
	defer func() {
		if bar != nil {
			_ = bar.Finish()
		}
	}()
	for {
		var reply api.EraseReply
		rctx, cancel := context.WithTimeout(ctx, eraseRequestTimeout)
		raw, err := operatorRequest(rctx, nc, api.SubjectErase, body, "eraser", "erase", hint, jsonOut, stdout, &reply)
		cancel()
		if err != nil {
			return err
		}
		done := reply.State == "" || reply.State == api.EraseDone
		if done || !wait {
			if bar != nil {
				_ = bar.Finish()
				bar = nil
			}
			if jsonOut {
				fmt.Fprintf(stdout, "%s\n", raw)
				return nil
			}
			if done {
				fmt.Fprintf(stdout, "erased %s (%d events)\n", strings.Join(reply.Erased, ", "), reply.Events)
				return nil
			}
			deleted, total := eraseCounts(reply)
			fmt.Fprintf(stdout, "accepted: erasing %s (%d of %d events deleted so far); it goes on by itself, and `sessionlog erase %s` again shows where it stands\n",
				eraseIDs(reply), deleted, total, id)
			return nil
		}
		deleted, total := eraseCounts(reply)
		if bar == nil && (progressFlag == "always" || progressFlag == "auto" && progress.IsTerminal(stderr)) {
			bar = progress.Events(stderr, total, "erase "+eraseIDs(reply))
		}
		if bar != nil {
			if int64(total) > bar.GetMax64() {
				bar.ChangeMax64(int64(total))
			}
			_ = bar.Set64(int64(deleted))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(erasePollEvery):
		}
	}
}

// eraseRequestTimeout bounds one request: the eraser answers within
// seconds (a cascade's first request looks for the descendants).
const eraseRequestTimeout = 5 * time.Minute

// erasePollEvery is how often `erase --wait` asks where the jobs stand.
const erasePollEvery = 500 * time.Millisecond

func eraseCounts(r api.EraseReply) (deleted, total uint64) {
	for _, j := range r.Jobs {
		deleted += j.Deleted
		total += max(j.Total, j.Deleted)
	}
	return deleted, total
}

func eraseIDs(r api.EraseReply) string {
	ids := make([]string, len(r.Jobs))
	for i, j := range r.Jobs {
		ids[i] = j.SessionID
	}
	return strings.Join(ids, ", ")
}
