package logstore

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/synadia-io/orbit.go/jetstreamext"
)

// Each publish answer is classified as the append's outcome procedure
// needs it: only a definite refusal is "nothing stored".
func TestClassify(t *testing.T) {
	api := func(code int, ec jetstream.ErrorCode) error {
		return fmt.Errorf("nats: %w", &jetstream.APIError{Code: code, ErrorCode: ec, Description: "x"})
	}
	for _, tc := range []struct {
		name string
		err  error
		want outcome
	}{
		{"ok", nil, committed},
		{"wrong last sequence", api(400, jetstream.JSErrCodeStreamWrongLastSequence), wrongSeq},
		{"wrong last sequence (constant)", api(400, jetstream.JSErrCodeStreamWrongLastSequenceConstant), wrongSeq},
		{"batch duplicate", api(400, jetstreamext.JSErrCodeBatchPublishDuplicateMsgID), duplicate},
		// An id in process may still be stored by the send that holds it.
		{"duplicate in process", api(409, errCodeDuplicateInProcess), unknown},
		{"too many batches", api(429, jetstreamext.JSErrCodeAtomicPublishTooManyInflight), retrying},
		{"no leader", api(503, 10008), retrying},
		{"message too large", api(400, 10054), refused},
		{"no responders", nats.ErrNoResponders, retrying},
		{"max payload", nats.ErrMaxPayload, refused},
		{"timeout", nats.ErrTimeout, unknown},
		{"deadline", context.DeadlineExceeded, unknown},
		{"connection closed", errors.New("nats: connection closed"), unknown},
	} {
		if got := classify(tc.err); got != tc.want {
			t.Errorf("%s: classify(%v) = %d, want %d", tc.name, tc.err, got, tc.want)
		}
	}
}
