// Package clientlog is agentlog.Log on the Go client (pkg/client): the one
// adapter through which ship, import --from and the source service append
// what they map from an agent's files, and read back what is stored.
//
// Everything it reads and appends goes through the writer, as the
// caller: the tail too. The writer judges the read as it judges the
// append that follows (an erased session answers erased, an unreadable
// one the verdict on its first bad message, a tenant only its own
// sessions), so the tail a sink compares against is the one the writer
// will hold the append to, never one read from the store past it.
package clientlog

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/sessionlog/sessionlog/pkg/agentlog"
	"github.com/sessionlog/sessionlog/pkg/api"
	"github.com/sessionlog/sessionlog/pkg/client"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// Log is agentlog.Log on a client.
type Log struct {
	Client *client.Client
	// Holder is the lease holder appends are made under ("": none).
	Holder string
	// Caller is who the writer is asked as (client.AsCaller; the zero
	// Caller: the connection's own).
	Caller api.Caller
	// Wire, Asked and Stored rename one session: the one the sink names
	// Wire is asked of the writer as Asked, and its stored events, which
	// carry Stored, are given back as Wire's. Unset: no session renamed.
	Wire, Asked, Stored string
	// Err, when set, is what each error of the client becomes.
	Err func(error) error
}

var _ agentlog.PreparingLog = Log{}

// asked is the id the writer is asked for the session the sink names id.
func (l Log) asked(id string) string {
	if l.Wire != "" && id == l.Wire {
		return l.Asked
	}
	return id
}

// stored is the stored id of the session the sink names id.
func (l Log) stored(id string) string {
	if l.Wire != "" && id == l.Wire {
		return l.Stored
	}
	return id
}

func (l Log) ctx(ctx context.Context) context.Context { return client.AsCaller(ctx, l.Caller) }

func (l Log) err(err error) error {
	if err == nil || l.Err == nil {
		return err
	}
	return l.Err(err)
}

func (l Log) read(ctx context.Context, req api.ReadRequest) (api.ReadReply, error) {
	page, err := l.Client.Read(l.ctx(ctx), req)
	return page, l.err(err)
}

// Tail reads the session's last seq through the writer, then the event
// at it (0 and "" for a session the writer does not find).
func (l Log) Tail(ctx context.Context, id string) (uint64, string, error) {
	asked := l.asked(id)
	page, err := l.read(ctx, api.ReadRequest{SessionID: asked, Limit: 1})
	switch {
	case codeOf(err) == schema.CodeNotFound:
		return 0, "", nil
	case err != nil || page.LastSeq == 0:
		return 0, "", err
	}
	last := page.LastSeq
	if page, err = l.read(ctx, api.ReadRequest{SessionID: asked, AfterSeq: last - 1, Limit: 1}); err != nil {
		return 0, "", err
	}
	if len(page.Events) == 0 {
		return 0, "", fmt.Errorf("no event at its last seq %d", last)
	}
	e, err := schema.Decode(page.Events[0])
	return last, e.EventID, err
}

// codeOf is an error's code, from the client or converted by Err.
func codeOf(err error) api.Code {
	if c := client.CodeOf(err); c != "" {
		return c
	}
	if err == nil {
		return ""
	}
	return schema.CodeOf(err)
}

// Events reads the session's events after seq a page at a time, the
// first page of one event (a sink that needs only session/created reads
// no more).
func (l Log) Events(ctx context.Context, id string, after uint64, fn func(schema.Envelope) error) error {
	limit := 1
	stored := l.stored(id)
	return agentlog.EachStored(after, func(after uint64) ([]json.RawMessage, bool, error) {
		page, err := l.read(ctx, api.ReadRequest{SessionID: l.asked(id), AfterSeq: after, Limit: limit})
		limit = 0
		if codeOf(err) == schema.CodeNotFound {
			return nil, false, nil
		}
		return page.Events, page.More, err
	}, func(e schema.Envelope) error {
		if e.SessionID == stored {
			e.SessionID = id
		}
		return fn(e)
	})
}

// request is the append of events after expected, as the writer is asked
// it: an operator names the stored id, in the request and the events.
func (l Log) request(id string, expected uint64, events []schema.Envelope) client.AppendRequest {
	if asked := l.asked(id); asked != id {
		events = slices.Clone(events)
		for i := range events {
			if events[i].SessionID == id {
				events[i].SessionID = asked
			}
		}
		id = asked
	}
	return client.AppendRequest{SessionID: id, ExpectedSeq: client.Seq(expected), Holder: l.Holder, Events: events}
}

func (l Log) Append(ctx context.Context, id string, expected uint64, events []schema.Envelope) (uint64, bool, error) {
	r, err := l.Client.Append(l.ctx(ctx), l.request(id, expected, events))
	return r.LastSeq, r.Duplicate, l.err(err)
}

// PrepareAppend encodes the append Append would send (an import encodes
// its next batch while its appends in flight are unanswered).
func (l Log) PrepareAppend(id string, expected uint64, events []schema.Envelope) (func(context.Context) (uint64, bool, error), error) {
	p, err := l.Client.PrepareAppend(l.request(id, expected, events))
	if err != nil {
		return nil, l.err(err)
	}
	return func(ctx context.Context) (uint64, bool, error) {
		r, err := l.Client.SendAppend(l.ctx(ctx), p)
		return r.LastSeq, r.Duplicate, l.err(err)
	}, nil
}
