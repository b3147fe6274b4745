package clientlog_test

import (
	"errors"
	"testing"

	"github.com/sessionlog/sessionlog/internal/clientlog"
	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/writertest"
	"github.com/sessionlog/sessionlog/pkg/api"
	"github.com/sessionlog/sessionlog/pkg/client"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// The adapter reads the tail through the writer, in both its shapes: a
// holder and the session under its own name (ship, import), and the
// session the sink names by its mapped id asked for by another, errors as
// schema errors (the source service; services/source and internal/ship
// check their own logs the same way).
func TestTailThroughTheWriter(t *testing.T) {
	k := writertest.New(t, logstore.Config{})
	toSchema := func(err error) error {
		var ce *client.Error
		if !errors.As(err, &ce) {
			return err
		}
		return &schema.Error{Code: ce.Code, Message: ce.Message, Index: ce.Index}
	}
	writertest.CheckTail(t, k.NC, k.St, clientlog.Log{Client: k.Cl, Holder: "h:claude-code:s.jsonl"}, "s-plain", "s-plain", client.CodeOf)
	writertest.CheckTail(t, k.NC, k.St, clientlog.Log{Client: k.Cl, Wire: "w-named", Asked: "s-named", Stored: "s-named", Err: toSchema}, "w-named", "s-named",
		func(err error) api.Code { return schema.CodeOf(err) })
}
