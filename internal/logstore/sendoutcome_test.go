package logstore

import (
	"errors"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/synadia-io/orbit.go/jetstreamext"

	"github.com/sessionlog/sessionlog/pkg/schema"
)

// ClassifySend, the classifier grouped appends use, agrees with the
// append's: a check or an id that fails the batch refuses it, what the
// server could not take yet is worth sending again, and a send with no
// answer may be stored.
func TestClassifySend(t *testing.T) {
	api := func(code int, ec jetstream.ErrorCode) error {
		return fmt.Errorf("nats: %w", &jetstream.APIError{Code: code, ErrorCode: ec, Description: "x"})
	}
	for _, tc := range []struct {
		name string
		err  error
		want SendOutcome
	}{
		{"wrong last sequence", api(400, jetstream.JSErrCodeStreamWrongLastSequence), SendRefused},
		{"batch duplicate", api(400, jetstreamext.JSErrCodeBatchPublishDuplicateMsgID), SendRefused},
		{"message too large", api(400, 10054), SendRefused},
		{"max payload", nats.ErrMaxPayload, SendRefused},
		{"too many batches", api(429, jetstreamext.JSErrCodeBatchPublishTooManyInflight), SendRetry},
		{"too many requests", api(429, 10999), SendRetry},
		{"batch incomplete", api(400, jetstreamext.JSErrCodeBatchPublishIncomplete), SendRetry},
		{"no leader", api(503, 10008), SendRetry},
		{"no responders", nats.ErrNoResponders, SendRetry},
		{"no stream response", jetstream.ErrNoStreamResponse, SendRetry},
		{"not sent", fmt.Errorf("%w: batch", errRefusedLocally), SendRetry},
		{"bad group", schema.Errorf(schema.CodeBadRequest, "x"), SendRefused},
		{"duplicate in process", api(409, errCodeDuplicateInProcess), SendUnknown},
		{"timeout", nats.ErrTimeout, SendUnknown},
		{"answer lost", errors.New("answer lost"), SendUnknown},
	} {
		if got := ClassifySend(tc.err); got != tc.want {
			t.Errorf("%s: ClassifySend(%v) = %d, want %d", tc.name, tc.err, got, tc.want)
		}
	}
}
