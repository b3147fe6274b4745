package source

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"strconv"

	"github.com/nats-io/nats.go"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/pkg/agentlog/formats"
	"github.com/sessionlog/sessionlog/pkg/api"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// The source index (SESSION_SOURCES, docs/adr/007-source-index.md) holds
// two records per transcript written through sessions.api.source.append:
//
//	o.<sessionId>                          the key that owns the session (first writer wins)
//	p.<format>.<project>.<session>[.<sub>] the listing record, with its mtime
//
// <project> is 128 bits of the SHA-256 of the project key (base64url), and
// <session>, <sub> the session key and subpath in base64url: a listing of
// one project reads the subjects of that project only. <sessionId> is the
// stored id, and the project key of a tenant other than the default is
// held under its tenant's prefix, _T<T>_<project key> (scope.key): a
// tenant's keys are its own, and an erase finds the listing record from
// the owner record as it always did.

// sourceRecord is the value of both records: the transcript's key, its
// session (stored id), and (listing records) the epoch ms of its last
// write and the agent whose append wrote it (none: an operator's, or a
// record written before records named one).
type sourceRecord struct {
	api.SourceKey
	SessionID string        `json:"sessionId"`
	Mtime     int64         `json:"mtime,omitempty"`
	Writer    *schema.Owner `json:"writer,omitempty"`
}

// Bounds of a source key: a session key or subpath that fits a session id
// without the hash suffix of a long id (whose 32 bits an agent could
// collide on purpose), and a project key as the SDK makes them (a
// sanitized path of at most 200 characters and a hash).
const (
	maxSourceSessionKey = 120
	maxSourceSubpath    = 200
	maxSourceProjectKey = 1024
)

// The keys are made in package logstore, which drops them when the
// session is erased.
func ownerKey(sessionID string) string { return logstore.SourceOwnerKey(sessionID) }

func projectPrefix(format, projectKey string) string {
	return logstore.SourceProjectPrefix(format, projectKey)
}

func listKey(k api.SourceKey) string { return logstore.SourceListKey(k) }

// errForeignKey: the session was written through another key (another
// project). The message names neither the other project nor its key.
func errForeignKey(id string) error {
	return schema.Errorf(schema.CodeConflict, "session %s was written under another project key", id)
}

// sourceOwner checks that key k (as the index holds it) owns the session
// stored as stored (id on the wire): nil when it does, or when no key owns
// it yet and claim is false; with claim, an unowned session becomes the
// key's (of two keys racing, the first wins), once the caller is found to
// may use it (mayUse: no key is recorded for another agent's session).
// owner is the owner record when this call wrote it (nil otherwise): an
// append the writer then refuses forbidden drops it (dropOwner). An owner
// record of another key that an append refused this way left (its
// service stopped before the drop) is stale and is dropped here (stale).
func (s *Service) sourceOwner(ctx context.Context, sc scope, k api.SourceKey, id, stored string, claim bool) (owner []byte, err error) {
	checked := false
	for range 3 {
		rec, ok, err := s.st.SourceGet(ctx, ownerKey(stored))
		if err != nil {
			return nil, err
		}
		if ok {
			var r sourceRecord
			if err := json.Unmarshal(rec.Value, &r); err != nil {
				return nil, schema.Errorf(schema.CodeInternal, "source record of %s: %v", id, err)
			}
			if r.SourceKey == k {
				return nil, nil
			}
			// Another key's session: a caller that may not use it is
			// told so (forbidden), as for its own key.
			if err := s.mayUse(ctx, sc, id, stored); err != nil {
				return nil, err
			}
			if stale, err := s.stale(ctx, sc, r, stored); err != nil || !stale {
				return nil, cmp.Or(err, errForeignKey(id))
			}
			if _, err := s.st.DropSourceOwner(ctx, stored, rec.Value); err != nil {
				return nil, err
			}
			s.log.Info("source: dropped a stale owner record", "session", stored, "writer", r.Writer)
			continue
		}
		if !claim {
			return nil, nil
		}
		if !checked {
			if err := s.mayUse(ctx, sc, id, stored); err != nil {
				return nil, err
			}
			checked = true
			if h := s.afterCheck.Load(); h != nil {
				(*h)()
			}
		}
		b, _ := json.Marshal(sourceRecord{SourceKey: k, SessionID: stored, Writer: sc.caller.Owner()})
		err = s.st.SourceCreate(ctx, ownerKey(stored), b)
		if err == nil {
			return b, nil
		}
		if !errors.Is(err, logstore.ErrSourceExists) {
			return nil, err
		}
	}
	return nil, errForeignKey(id)
}

// stale says whether owner record r, of another key than the caller's,
// is one an append the writer refused left behind: it names the agent
// whose append wrote it (records written before owner records named one,
// and an operator's, name none and are never stale), that agent is not
// the caller, and the writer refuses that agent the session (forbidden:
// the session is another agent's, and does not grant it; grants are
// never taken back, so a record the writer once let its agent write is
// never found stale). A session that does not exist yet is still its to
// create: not stale.
func (s *Service) stale(ctx context.Context, sc scope, r sourceRecord, stored string) (bool, error) {
	if r.Writer == nil || sc.caller.Owner() != nil && *r.Writer == *sc.caller.Owner() {
		return false, nil
	}
	as := scope{caller: api.Caller{Tenant: r.Writer.Tenant, Agent: r.Writer.Agent}, prefix: sc.prefix}
	err := s.mayUse(ctx, as, as.caller.WireID(stored), stored)
	if schema.CodeOf(err) == schema.CodeForbidden {
		return true, nil
	}
	return false, err
}

// dropOwner drops the owner record a source append wrote (owner, from
// sourceOwner) when the writer refused the append forbidden: the session
// is another agent's (created between the check and the record), and a
// refused append leaves no record. A drop that fails is logged: the
// record is then stale, and the next append of another key drops it.
func (s *Service) dropOwner(ctx context.Context, stored string, owner []byte, err error) {
	if owner == nil || schema.CodeOf(err) != schema.CodeForbidden {
		return
	}
	if _, derr := s.st.DropSourceOwner(context.WithoutCancel(ctx), stored, owner); derr != nil {
		s.log.Warn("source: dropping the owner record of a refused append", "session", stored, "err", derr)
	}
}

// indexSource writes the listing record of a transcript (k as the index
// holds it, its session's stored id), stamped now and with its writer.
func (s *Service) indexSource(ctx context.Context, sc scope, k api.SourceKey, stored string) error {
	b, _ := json.Marshal(sourceRecord{SourceKey: k, SessionID: stored, Mtime: s.cfg.Now().UnixMilli(), Writer: sc.caller.Owner()})
	return s.st.SourcePut(ctx, listKey(k), b)
}

// checkProject checks a listing's format and project key.
func checkProject(format, projectKey string) error {
	if _, ok := formats.Lookup(format); !ok {
		return schema.Errorf(schema.CodeBadRequest, "unknown format %q", format)
	}
	if projectKey == "" || len(projectKey) > maxSourceProjectKey {
		return schema.Errorf(schema.CodeBadRequest, "projectKey must have 1 to %d bytes", maxSourceProjectKey)
	}
	return nil
}

// sourcePage reads a page request: its size and the bucket position after
// which it starts.
func sourcePage(limit int, cursor string) (int, uint64, error) {
	if limit < 0 || limit > api.SourcePageMax {
		return 0, 0, schema.Errorf(schema.CodeBadRequest, "limit %d is not within 0..%d", limit, api.SourcePageMax)
	}
	if limit == 0 {
		limit = api.SourcePageDefault
	}
	var after uint64
	if cursor != "" {
		var err error
		if after, err = strconv.ParseUint(cursor, 10, 64); err != nil {
			return 0, 0, schema.Errorf(schema.CodeBadRequest, "cursor %q is not one this service gave", cursor)
		}
	}
	return limit, after, nil
}

// listSources reads one page of listing records under prefix (a filter
// with one more token), those of the project (as the index holds its key)
// only, erased sessions and those the caller may not read left out.
func (s *Service) listSources(ctx context.Context, sc scope, projectKey, filter string, limit int, cursor string, fn func(sourceRecord)) (string, error) {
	limit, after, err := sourcePage(limit, cursor)
	if err != nil {
		return "", err
	}
	recs, next, err := s.st.SourceList(ctx, filter, after, limit)
	if err != nil {
		return "", err
	}
	for _, rec := range recs {
		var r sourceRecord
		if err := json.Unmarshal(rec.Value, &r); err != nil || r.ProjectKey != projectKey {
			continue // not this project's (a hash collision), or not a record of ours
		}
		erased, err := s.st.Erased(ctx, r.SessionID)
		if err != nil {
			return "", err
		}
		if erased {
			continue
		}
		if ok, err := s.visible(ctx, sc, r); err != nil {
			return "", err
		} else if ok {
			fn(r)
		}
	}
	if next == 0 {
		return "", nil
	}
	return strconv.FormatUint(next, 10), nil
}

// visible says whether the caller may read the session of a listing
// record: an operator any; an agent the ones whose record its own append
// wrote (the writer let it write them, and a grant is never taken back),
// else those the writer lets it read (its answer to a read of the first
// event as the caller: owned or granted; forbidden, not_found and the
// like leave the record out, saying nothing of it).
func (s *Service) visible(ctx context.Context, sc scope, r sourceRecord) (bool, error) {
	if sc.caller.Operator() || r.Writer != nil && *r.Writer == *sc.caller.Owner() {
		return true, nil
	}
	_, err := s.read(ctx, sc, api.ReadRequest{SessionID: sc.caller.WireID(r.SessionID), Limit: 1})
	if err == nil {
		return true, nil
	}
	switch schema.CodeOf(err) {
	case schema.CodeForbidden, schema.CodeNotFound, schema.CodeBadRequest, schema.CodeErased, schema.CodeUnreadable:
		return false, nil
	}
	return false, err
}

// SourceList lists a page of a project's main transcripts, as an operator.
func (s *Service) SourceList(ctx context.Context, req api.SourceListRequest) (api.SourceListReply, error) {
	return s.SourceListAs(ctx, api.Caller{}, req)
}

// SourceListAs lists a page of a project's main transcripts that caller
// may read, of its tenant.
func (s *Service) SourceListAs(ctx context.Context, caller api.Caller, req api.SourceListRequest) (api.SourceListReply, error) {
	if err := checkProject(req.Format, req.ProjectKey); err != nil {
		return api.SourceListReply{}, err
	}
	sc, err := scopeOf(caller, req.ProjectKey)
	if err != nil {
		return api.SourceListReply{}, err
	}
	k := sc.key(api.SourceKey{Format: req.Format, ProjectKey: req.ProjectKey})
	rep := api.SourceListReply{Sessions: []api.SourceListed{}}
	next, err := s.listSources(ctx, sc, k.ProjectKey, projectPrefix(k.Format, k.ProjectKey)+"*", req.Limit, req.Cursor, func(r sourceRecord) {
		rep.Sessions = append(rep.Sessions, api.SourceListed{SessionKey: r.SessionKey, Mtime: r.Mtime})
	})
	rep.Next = next
	return rep, err
}

// SourceSubkeys lists a page of the subpaths stored under a transcript,
// as an operator.
func (s *Service) SourceSubkeys(ctx context.Context, req api.SourceSubkeysRequest) (api.SourceSubkeysReply, error) {
	return s.SourceSubkeysAs(ctx, api.Caller{}, req)
}

// SourceSubkeysAs lists a page of the subpaths stored under a transcript
// whose sessions caller may read, of its tenant.
func (s *Service) SourceSubkeysAs(ctx context.Context, caller api.Caller, req api.SourceSubkeysRequest) (api.SourceSubkeysReply, error) {
	k := api.SourceKey{Format: req.Format, ProjectKey: req.ProjectKey, SessionKey: req.SessionKey}
	if _, _, err := sourceSession(k); err != nil {
		return api.SourceSubkeysReply{}, err
	}
	sc, err := scopeOf(caller, req.ProjectKey)
	if err != nil {
		return api.SourceSubkeysReply{}, err
	}
	k = sc.key(k)
	rep := api.SourceSubkeysReply{Subkeys: []string{}}
	next, err := s.listSources(ctx, sc, k.ProjectKey, listKey(k)+".*", req.Limit, req.Cursor, func(r sourceRecord) {
		rep.Subkeys = append(rep.Subkeys, r.Subpath)
	})
	rep.Next = next
	return rep, err
}

// serveSource answers a source request: decoded into Req (what names it
// in the refusal of one that does not decode), then fn's reply for the
// caller the server named (api.CallerOf: none, from inside the services'
// account, is an operator).
func serveSource[Req, Rep any](s *Service, ctx context.Context, m *nats.Msg, what string, fn func(context.Context, api.Caller, Req) (Rep, error)) {
	caller, err := api.CallerOf(m.Header.Values(api.RequestInfoHeader))
	if err != nil {
		s.respondJSON(m.Reply, nil, err)
		return
	}
	var req Req
	if err := schema.Unmarshal(m.Data, &req); err != nil {
		s.respondJSON(m.Reply, nil, schema.Errorf(schema.CodeBadRequest, "request is not a valid source %s request: %v", what, err))
		return
	}
	rep, err := fn(ctx, caller, req)
	s.respondJSON(m.Reply, rep, err)
}

func (s *Service) handleSourceList(ctx context.Context, m *nats.Msg) {
	serveSource(s, ctx, m, "list", s.SourceListAs)
}

func (s *Service) handleSourceSubkeys(ctx context.Context, m *nats.Msg) {
	serveSource(s, ctx, m, "subkeys", s.SourceSubkeysAs)
}
