package sre

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/sessionlog/sessionlog/internal/logstore"
)

// AckLost acknowledges every loss kept in logstore.LostBucket not
// acknowledged yet (verify --ack-lost): the projector's check and verify
// no longer report it. It prints a line for each.
func AckLost(ctx context.Context, st *logstore.Store, stdout io.Writer) error {
	acked, err := st.AckLost(ctx, "", time.Now())
	for _, r := range acked {
		ld := logstore.LostData{Msgs: r.Msgs, Bytes: r.Bytes}
		fmt.Fprintf(stdout, "ACKED stream=%s key=%s seen=%s: nats-server %s\n", r.Stream, r.Key, r.SeenAt.Format(time.RFC3339), ld.Describe())
	}
	if err != nil {
		return fmt.Errorf("verify --ack-lost: %w", err)
	}
	return nil
}
