package logstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
)

// A lease renewal (TakeLease of a lease the holder holds: the leader's
// read of the lease, then the write expecting its revision) over 64
// sessions in turn, embedded server in the process, plain and with the
// values sealed (DESIGN.md section 2): the seal and the open of the
// value read are what the sealed one adds (the keys are in the store's
// cache after the first lease of each session, taken before the timer).
func BenchmarkRenewLease(b *testing.B)       { benchRenewLease(b, false) }
func BenchmarkRenewLeaseSealed(b *testing.B) { benchRenewLease(b, true) }

func benchRenewLease(b *testing.B, sealed bool) {
	srv := natstest.RunServer(b)
	nc := natstest.Connect(b, srv)
	ctx := context.Background()
	st, err := logstore.Open(ctx, nc, logstore.Config{SealBodies: sealed, LeaseTTL: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	ids := make([]string, 64)
	now := time.Now()
	for i := range ids {
		ids[i] = fmt.Sprintf("s-%d", i)
		if err := st.RenewLease(ctx, ids[i], "agent-bench", now); err != nil {
			b.Fatal(err)
		}
	}
	i := 0
	for b.Loop() {
		if err := st.TakeLease(ctx, ids[i%len(ids)], "agent-bench", now, false); err != nil {
			b.Fatal(err)
		}
		i++
	}
}
