package projector

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// A projector waits out JetStream being unavailable at start and exits on
// anything else.
func TestUnavailable(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{fmt.Errorf("x: %w", &jetstream.APIError{Code: 503, ErrorCode: 10008}), true},
		{context.DeadlineExceeded, true},
		{nats.ErrTimeout, true},
		{nats.ErrNoResponders, true},
		{jetstream.ErrNoStreamResponse, true},
		{&jetstream.APIError{Code: 404, ErrorCode: jetstream.JSErrCodeStreamNotFound}, false},
		{&jetstream.APIError{Code: 400, ErrorCode: 10025}, false},
		{errors.New("nats: authorization violation"), false},
	} {
		if got := unavailable(tc.err); got != tc.want {
			t.Errorf("unavailable(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
