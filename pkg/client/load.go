package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/sessionlog/sessionlog/pkg/api"
	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/pkg/session"
)

// Reader reads a session's stored events a page at a time, as
// sessions.api.read answers (DESIGN.md section 12). *Client implements it
// over NATS; the writer's service implements it in process.
type Reader interface {
	Read(ctx context.Context, req api.ReadRequest) (api.ReadReply, error)
}

var _ Reader = (*Client)(nil)

// Load rebuilds the session's State from the log, page by page through r.
// A session that does not exist loads as an empty state (Exists() false).
// A session holding an event this reader cannot decode or fold (a newer
// schema, an unknown required type) is refused with code unreadable,
// never guessed at.
func Load(ctx context.Context, r Reader, sessionID string) (*session.State, error) {
	if !schema.ValidSessionID(sessionID) {
		return nil, errorf(schema.CodeBadRequest, "session id %q is not valid", clip(sessionID))
	}
	st := session.New(sessionID)
	var after uint64
	for {
		page, err := r.Read(ctx, api.ReadRequest{SessionID: sessionID, AfterSeq: after})
		if err != nil {
			if CodeOf(err) == schema.CodeNotFound || schema.CodeOf(err) == schema.CodeNotFound {
				return st, nil
			}
			var ce *Error
			if errors.As(err, &ce) {
				return nil, err
			}
			return nil, fmt.Errorf("client: load %s: %w", sessionID, err)
		}
		for _, b := range page.Events {
			e, err := schema.Decode(b)
			if err != nil {
				return nil, errorf(schema.CodeUnreadable, "session %s after seq %d: %v", sessionID, st.LastSeq, err)
			}
			if err := st.Apply(&e); err != nil {
				return nil, errorf(schema.CodeUnreadable, "session %s seq %d does not fold: %v", sessionID, e.Seq, err)
			}
		}
		if !page.More {
			return st, nil
		}
		if len(page.Events) == 0 || st.LastSeq <= after {
			return nil, errorf(schema.CodeInternal, "session %s: a read page after seq %d said more but moved nothing", sessionID, after)
		}
		after = st.LastSeq
	}
}

// Read asks the writer for one page of a session (sessions.api.read). A
// session that does not exist is ErrNotFound. Reads change nothing, so a
// lost answer is simply asked again.
func (c *Client) Read(ctx context.Context, req api.ReadRequest) (api.ReadReply, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return api.ReadReply{}, errorf(schema.CodeBadRequest, "encode request: %v", err)
	}
	var r api.ReadReply
	if _, err := c.request(ctx, api.SubjectRead, body, &r); err != nil {
		return api.ReadReply{}, err
	}
	return r, nil
}

// LoadState implements StateLoader (for Recover) through the client's own
// connection: the writer reads the log for it, so the client's user needs
// no JetStream permission.
func (c *Client) LoadState(ctx context.Context, sessionID string) (*session.State, error) {
	return Load(ctx, c, sessionID)
}
