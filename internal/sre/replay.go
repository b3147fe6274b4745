package sre

import (
	"context"
	"errors"
	"io"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// Replay prints session id's stored events after seq after as JSON lines,
// each exactly as stored; a session that cannot be read past a message
// stops there with a *ReadProblem.
func Replay(ctx context.Context, st *logstore.Store, id string, after uint64, stdout io.Writer) (err error) {
	tail, err := ReadValid(ctx, st, id, func(m *logstore.Msg, e *schema.Envelope) error {
		if e.Seq <= after {
			return nil
		}
		return WriteLine(stdout, m.Data)
	})
	var rp *ReadProblem
	if errors.As(err, &rp) {
		return rp
	}
	if err != nil {
		return err
	}
	if !tail.Exists() {
		return Missing(ctx, st, id)
	}
	return nil
}
