package source

import (
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
// one project reads the subjects of that project only.

// sourceRecord is the value of both records: the transcript's key, its
// session, and (listing records) the epoch ms of its last write.
type sourceRecord struct {
	api.SourceKey
	SessionID string `json:"sessionId"`
	Mtime     int64  `json:"mtime,omitempty"`
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

// sourceOwner checks that key owns session id: nil when it does, or when
// no key owns it yet and claim is false; with claim, an unowned session
// becomes the key's (of two keys racing, the first wins). created says the
// owner record was written now.
func (s *Service) sourceOwner(ctx context.Context, k api.SourceKey, id string, claim bool) (created bool, err error) {
	for range 2 {
		rec, ok, err := s.st.SourceGet(ctx, ownerKey(id))
		if err != nil {
			return false, err
		}
		if ok {
			var r sourceRecord
			if err := json.Unmarshal(rec.Value, &r); err != nil {
				return false, schema.Errorf(schema.CodeInternal, "source record of %s: %v", id, err)
			}
			if r.SourceKey != k {
				return false, errForeignKey(id)
			}
			return false, nil
		}
		if !claim {
			return false, nil
		}
		b, _ := json.Marshal(sourceRecord{SourceKey: k, SessionID: id})
		err = s.st.SourceCreate(ctx, ownerKey(id), b)
		if err == nil {
			return true, nil
		}
		if !errors.Is(err, logstore.ErrSourceExists) {
			return false, err
		}
	}
	return false, errForeignKey(id)
}

// indexSource writes the listing record of a transcript, stamped now.
func (s *Service) indexSource(ctx context.Context, k api.SourceKey, id string) error {
	b, _ := json.Marshal(sourceRecord{SourceKey: k, SessionID: id, Mtime: s.cfg.Now().UnixMilli()})
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
// with one more token), those of the project only, erased sessions left
// out.
func (s *Service) listSources(ctx context.Context, projectKey, filter string, limit int, cursor string, fn func(sourceRecord)) (string, error) {
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
		if !erased {
			fn(r)
		}
	}
	if next == 0 {
		return "", nil
	}
	return strconv.FormatUint(next, 10), nil
}

// SourceList lists a page of a project's main transcripts.
func (s *Service) SourceList(ctx context.Context, req api.SourceListRequest) (api.SourceListReply, error) {
	if err := checkProject(req.Format, req.ProjectKey); err != nil {
		return api.SourceListReply{}, err
	}
	rep := api.SourceListReply{Sessions: []api.SourceListed{}}
	next, err := s.listSources(ctx, req.ProjectKey, projectPrefix(req.Format, req.ProjectKey)+"*", req.Limit, req.Cursor, func(r sourceRecord) {
		rep.Sessions = append(rep.Sessions, api.SourceListed{SessionKey: r.SessionKey, Mtime: r.Mtime})
	})
	rep.Next = next
	return rep, err
}

// SourceSubkeys lists a page of the subpaths stored under a transcript.
func (s *Service) SourceSubkeys(ctx context.Context, req api.SourceSubkeysRequest) (api.SourceSubkeysReply, error) {
	k := api.SourceKey{Format: req.Format, ProjectKey: req.ProjectKey, SessionKey: req.SessionKey}
	if _, _, err := sourceSession(k); err != nil {
		return api.SourceSubkeysReply{}, err
	}
	rep := api.SourceSubkeysReply{Subkeys: []string{}}
	next, err := s.listSources(ctx, req.ProjectKey, listKey(k)+".*", req.Limit, req.Cursor, func(r sourceRecord) {
		rep.Subkeys = append(rep.Subkeys, r.Subpath)
	})
	rep.Next = next
	return rep, err
}

// serveSource answers a source request: decoded into Req (what names it
// in the refusal of one that does not decode), then fn's reply.
func serveSource[Req, Rep any](s *Service, ctx context.Context, m *nats.Msg, what string, fn func(context.Context, Req) (Rep, error)) {
	var req Req
	if err := schema.Unmarshal(m.Data, &req); err != nil {
		s.respondJSON(m.Reply, nil, schema.Errorf(schema.CodeBadRequest, "request is not a valid source %s request: %v", what, err))
		return
	}
	rep, err := fn(ctx, req)
	s.respondJSON(m.Reply, rep, err)
}

func (s *Service) handleSourceList(ctx context.Context, m *nats.Msg) {
	serveSource(s, ctx, m, "list", s.SourceList)
}

func (s *Service) handleSourceSubkeys(ctx context.Context, m *nats.Msg) {
	serveSource(s, ctx, m, "subkeys", s.SourceSubkeys)
}
