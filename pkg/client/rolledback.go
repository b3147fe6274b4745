package client

import (
	"errors"
	"sync"

	"github.com/sessionlog/sessionlog/pkg/api"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// The client remembers, per session, the last seq acknowledged to it and
// the hash the writer gave for it (api.AppendReply.Hash: the hash chain's
// link, DESIGN.md section 2). A later answer that shows the log shorter
// than that seq, or a different event there, is the log having lost what
// it acknowledged: the client answers rolled_back (ErrRolledBack) instead
// of taking it for a misread to retry.

type acked struct {
	seq  uint64
	hash string // empty: not known
}

type acks struct {
	mu sync.Mutex
	m  map[string]acked
}

func (a *acks) get(sessionID string) (acked, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	v, ok := a.m[sessionID]
	return v, ok
}

func (a *acks) put(sessionID string, v acked) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.m == nil {
		a.m = map[string]acked{}
	}
	if old, ok := a.m[sessionID]; !ok || v.seq >= old.seq {
		a.m[sessionID] = v
	}
}

// checkAppend judges an append's outcome against prev, what was
// acknowledged of its session before the append was sent (taken then: an
// append acknowledged meanwhile, concurrently, may hold a later seq), and
// remembers a committed one. A new append stored at or before an
// acknowledged seq, a duplicate ending there under another hash, or a
// conflict naming a last seq before it: rolled_back.
func (c *Client) checkAppend(sessionID string, prev acked, ok bool, reply api.AppendReply, err error) error {
	if err != nil {
		var e *Error
		if ok && errors.As(err, &e) && e.Code == schema.CodeConflict && e.hasCurrent && e.CurrentSeq < prev.seq {
			return errorf(schema.CodeRolledBack, "session %s: the log's last seq is %d, but seq %d was acknowledged earlier: the log lost acknowledged events (%v)",
				sessionID, e.CurrentSeq, prev.seq, err)
		}
		return err
	}
	if ok {
		switch {
		case !reply.Duplicate && reply.FirstSeq <= prev.seq:
			return errorf(schema.CodeRolledBack, "session %s: the append was stored as seqs %d..%d, but seq %d was acknowledged earlier: the log lost acknowledged events (this append is stored)",
				sessionID, reply.FirstSeq, reply.LastSeq, prev.seq)
		case reply.LastSeq == prev.seq && reply.Hash != "" && prev.hash != "" && reply.Hash != prev.hash:
			return errorf(schema.CodeRolledBack, "session %s: seq %d is not the event acknowledged earlier (hash %s, was %s): the log lost acknowledged events",
				sessionID, prev.seq, reply.Hash, prev.hash)
		}
	}
	c.acks.put(sessionID, acked{seq: reply.LastSeq, hash: reply.Hash})
	return nil
}

// checkRead judges a read's answer against prev, what was acknowledged of
// the session before the read was sent: a session whose last seq is
// before it lost it, and one whose page holds another event at that seq
// (its chain hash is not the one acknowledged) lost it and stored another
// in its place.
func checkRead(sessionID string, prev acked, req api.ReadRequest, reply api.ReadReply) error {
	if reply.LastSeq < prev.seq {
		return errorf(schema.CodeRolledBack, "session %s: the log's last seq is %d, but seq %d was acknowledged earlier: the log lost acknowledged events",
			sessionID, reply.LastSeq, prev.seq)
	}
	if prev.hash != "" && prev.seq > req.AfterSeq && prev.seq-req.AfterSeq <= uint64(len(reply.Events)) {
		if h := api.ChainHash(reply.Events[prev.seq-req.AfterSeq-1]); h != prev.hash {
			return errorf(schema.CodeRolledBack, "session %s: seq %d is not the event acknowledged earlier (hash %s, was %s): the log lost acknowledged events",
				sessionID, prev.seq, h, prev.hash)
		}
	}
	return nil
}
