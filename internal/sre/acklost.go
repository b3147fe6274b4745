package sre

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/sessionlog/sessionlog/internal/logstore"
)

// AckLost acknowledges every loss kept in logstore.LostBucket not
// acknowledged yet (verify --ack-lost): the projector's check and verify
// no longer report it. It prints a line for each, or with asJSON an
// object.
func AckLost(ctx context.Context, st *logstore.Store, asJSON bool, stdout io.Writer) error {
	acked, err := st.AckLost(ctx, "", time.Now())
	enc := json.NewEncoder(stdout)
	for _, r := range acked {
		if asJSON {
			_ = enc.Encode(map[string]any{"acked": true, "stream": r.Stream, "key": r.Key, "msgs": r.Msgs, "bytes": r.Bytes, "seenAt": r.SeenAt})
			continue
		}
		ld := logstore.LostData{Msgs: r.Msgs, Bytes: r.Bytes}
		fmt.Fprintf(stdout, "ACKED stream=%s key=%s seen=%s: nats-server %s\n", r.Stream, r.Key, r.SeenAt.Format(time.RFC3339), ld.Describe())
	}
	if err != nil {
		return fmt.Errorf("verify --ack-lost: %w", err)
	}
	return nil
}
