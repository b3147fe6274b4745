package sre

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/sessionlog/sessionlog/internal/logstore"
)

// Locate prints where session id lives in the store: its stream and
// subject, by the partition count the store recorded. A session with no
// events is missing (Missing).
func Locate(ctx context.Context, st *logstore.Store, id string, asJSON bool, stdout io.Writer) (err error) {
	loc, err := st.Locate(id)
	if err != nil {
		return err
	}
	tail, err := st.Tail(ctx, id)
	if err != nil {
		return err
	}
	if !tail.Exists() {
		// A subject printed for a session that is not there reads as a
		// place to look: say it is missing, and where it would be.
		return fmt.Errorf("%w (it would be stream %s subject %s)", Missing(ctx, st, id), loc.Stream, loc.Subject)
	}
	if asJSON {
		return json.NewEncoder(stdout).Encode(struct {
			SessionID  string `json:"sessionId"`
			Stream     string `json:"stream"`
			Subject    string `json:"subject"`
			Partition  int    `json:"partition"`
			Partitions int    `json:"partitions"`
		}{id, loc.Stream, loc.Subject, loc.Partition, st.Layout().Partitions()})
	}
	_, err = fmt.Fprintf(stdout, "stream %s subject %s partition %d of %d\n", loc.Stream, loc.Subject, loc.Partition, st.Layout().Partitions())
	return err
}
