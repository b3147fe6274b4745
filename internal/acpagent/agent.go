// Package acpagent is the Agent Client Protocol agent that `sessionlog acp`
// runs on stdio for an editor (DESIGN.md section 15, docs/acp.md): it lists
// the fleet's sessions and replays any of them, read-only.
//
// It reads through the projector's HTTP API, not NATS: an editor user
// holds at most the API's read token, while NATS would need either an
// agent's rights (which read no other session and cannot list the fleet)
// or an operator's (which also write, repair and erase). The API already
// lists sessions newest first in pages, and serves each session as ACP
// notifications (GET /v1/sessions/{id}/acp), so the mapping lives in one
// place and this agent forwards its lines.
package acpagent

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sessionlog/sessionlog/internal/version"
	"github.com/sessionlog/sessionlog/pkg/acp"
)

const (
	// DefaultHTTPURL is the projector API of a local `sessionlog up`.
	DefaultHTTPURL = "http://127.0.0.1:8080"
	// DefaultPageSize is the sessions of one session/list page.
	DefaultPageSize = 50
	// acpMaxLine bounds one JSON-RPC message read from either side.
	acpMaxLine = 16 << 20
	// acpRetry is the pause before a broken follow reconnects.
	acpRetry = time.Second
	// acpListTimeout bounds one session/list page from the projector.
	acpListTimeout = 30 * time.Second
)

// JSON-RPC error codes. ACP uses JSON-RPC's own, plus -32000
// (authentication required) and -32002 (resource not found).
const (
	rpcMethodNotFound    = -32601
	rpcInvalidParams     = -32602
	rpcInternal          = -32603
	rpcAuthRequired      = -32000
	CodeResourceNotFound = -32002
	// CodeReadOnly refuses what would change a session: sessionlog acp
	// replays recorded sessions and never runs an agent.
	CodeReadOnly = -32001
)

// Config is what one agent needs.
type Config struct {
	// BaseURL is the projector's HTTP API (no trailing slash needed).
	BaseURL string
	// Token is the API's bearer token, when it requires one.
	Token string
	// PageSize is the sessions per session/list page (1 to 1000;
	// 0: DefaultPageSize).
	PageSize int
	Logger   *slog.Logger
}

// Serve answers one editor: JSON-RPC requests from in, answers and
// notifications to out, until in ends (the editor closed it) or ctx does.
func Serve(ctx context.Context, cfg Config, in io.Reader, out io.Writer) error {
	if cfg.PageSize == 0 {
		cfg.PageSize = DefaultPageSize
	}
	if cfg.PageSize < 1 || cfg.PageSize > 1000 {
		return fmt.Errorf("acpagent: page size %d is not from 1 to 1000", cfg.PageSize)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	a := &acpAgent{base: strings.TrimRight(cfg.BaseURL, "/"), token: cfg.Token, page: cfg.PageSize, log: cfg.Logger,
		out: bufio.NewWriter(out), follows: map[string]context.CancelFunc{}}
	return a.serve(ctx, in)
}

// acpAgent answers one editor.
type acpAgent struct {
	base, token string
	page        int
	log         *slog.Logger
	http        http.Client

	mu  sync.Mutex // serializes writes to out
	out *bufio.Writer

	fmu     sync.Mutex
	follows map[string]context.CancelFunc // live follow of each loaded session
}

type rpcMessage struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
}

type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    any    `json:"data,omitempty"`
}

func (e *rpcError) Error() string { return e.Message }

// serve reads requests until in ends (the editor closed it) or ctx does.
func (a *acpAgent) serve(ctx context.Context, in io.Reader) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	r := bufio.NewReaderSize(in, 64<<10)
	for {
		line, err := readLine(r)
		if len(line) > 0 {
			var m rpcMessage
			if jerr := json.Unmarshal(line, &m); jerr != nil {
				a.reply(json.RawMessage("null"), nil, &rpcError{Code: -32700, Message: "parse error: " + jerr.Error()})
			} else if m.Method != "" && len(m.ID) > 0 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					res, rerr := a.handle(ctx, m)
					a.reply(m.ID, res, rerr)
				}()
			}
			// Notifications (session/cancel) and responses need nothing:
			// nothing runs, and this agent sends no requests.
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// readLine reads one line of at most acpMaxLine bytes.
func readLine(r *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		chunk, isPrefix, err := r.ReadLine()
		line = append(line, chunk...)
		if len(line) > acpMaxLine {
			return nil, fmt.Errorf("acp: a message over %d bytes", acpMaxLine)
		}
		if err != nil || !isPrefix {
			return line, err
		}
	}
}

func (a *acpAgent) write(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		a.log.Error("acp: encode", "err", err)
		return
	}
	a.writeLine(b)
}

func (a *acpAgent) writeLine(b []byte) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.out.Write(b)
	a.out.WriteByte('\n')
	a.out.Flush()
}

func (a *acpAgent) reply(id json.RawMessage, result any, err error) {
	msg := map[string]any{"jsonrpc": "2.0", "id": id}
	var re *rpcError
	switch {
	case err == nil:
		msg["result"] = result
	case errors.As(err, &re):
		msg["error"] = re
	default:
		msg["error"] = &rpcError{Code: rpcInternal, Message: err.Error()}
	}
	a.write(msg)
}

func (a *acpAgent) handle(ctx context.Context, m rpcMessage) (any, error) {
	switch m.Method {
	case "initialize":
		return a.initialize(m.Params)
	case "authenticate":
		return map[string]any{}, nil
	case "session/list":
		return a.list(ctx, m.Params)
	case "session/load":
		return a.load(ctx, m.Params)
	case "session/new":
		return nil, &rpcError{Code: CodeReadOnly, Message: "sessionlog acp is read-only: it opens recorded sessions (session/list, session/load) and cannot start one",
			Data: map[string]string{"reason": "read_only"}}
	case "session/prompt":
		return nil, &rpcError{Code: CodeReadOnly, Message: "sessionlog acp is read-only: it replays the fleet's recorded sessions and cannot prompt an agent; continue the session with the agent that recorded it",
			Data: map[string]string{"reason": "read_only"}}
	}
	return nil, &rpcError{Code: rpcMethodNotFound, Message: "method not found: " + m.Method}
}

func (a *acpAgent) initialize(params json.RawMessage) (any, error) {
	var p struct {
		ProtocolVersion *int `json:"protocolVersion"`
	}
	if json.Unmarshal(params, &p) != nil || p.ProtocolVersion == nil {
		return nil, &rpcError{Code: rpcInvalidParams, Message: "initialize needs protocolVersion"}
	}
	agentVersion := version.Get().Short()
	return map[string]any{
		"protocolVersion": acp.ProtocolVersion,
		"agentCapabilities": map[string]any{
			"loadSession": true,
			// A session/prompt is refused whatever it holds.
			"promptCapabilities":  map[string]any{"image": false, "audio": false, "embeddedContext": false},
			"mcpCapabilities":     map[string]any{"http": false, "sse": false},
			"sessionCapabilities": map[string]any{"list": map[string]any{}},
			"auth":                map[string]any{},
		},
		"authMethods": []any{},
		"agentInfo":   map[string]any{"name": "sessionlog", "title": "sessionlog (read-only replay)", "version": agentVersion},
	}, nil
}

// get requests path from the projector; a status other than 200 becomes
// the JSON-RPC error an editor shows.
func (a *acpAgent) get(ctx context.Context, path string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", a.base+path, nil)
	if err != nil {
		return nil, err
	}
	if a.token != "" {
		req.Header.Set("Authorization", "Bearer "+a.token)
	}
	resp, err := a.http.Do(req)
	if err != nil {
		return nil, &rpcError{Code: rpcInternal, Message: fmt.Sprintf("the projector at %s: %v", a.base, err)}
	}
	if resp.StatusCode == http.StatusOK {
		return resp, nil
	}
	defer resp.Body.Close()
	var body struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	msg := strings.TrimSpace(string(b))
	if json.Unmarshal(b, &body) == nil && body.Error.Message != "" {
		msg = body.Error.Message
	}
	code := rpcInternal
	switch resp.StatusCode {
	case http.StatusNotFound:
		code = CodeResourceNotFound
	case http.StatusUnauthorized, http.StatusForbidden:
		code = rpcAuthRequired
		msg = "the projector refused the request (set --http-token): " + msg
	case http.StatusBadRequest:
		code = rpcInvalidParams
	}
	return nil, &rpcError{Code: code, Message: msg, Data: map[string]any{"httpStatus": resp.StatusCode, "code": body.Error.Code}}
}

// list is session/list: the fleet's sessions, newest activity first, a
// page at a time (the cursor is the projector's). The cwd filter is not
// applied: the fleet's sessions ran on other hosts, and each one's cwd
// label (when its agent gave one) is its cwd here.
func (a *acpAgent) list(ctx context.Context, params json.RawMessage) (any, error) {
	var p struct {
		Cursor string `json:"cursor"`
	}
	if len(params) > 0 && json.Unmarshal(params, &p) != nil {
		return nil, &rpcError{Code: rpcInvalidParams, Message: "session/list params must be an object"}
	}
	q := url.Values{"limit": {strconv.Itoa(a.page)}}
	if p.Cursor != "" {
		q.Set("after", p.Cursor)
	}
	ctx, cancel := context.WithTimeout(ctx, acpListTimeout)
	defer cancel()
	resp, err := a.get(ctx, "/v1/sessions?"+q.Encode())
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var page struct {
		Sessions []struct {
			SessionID    string            `json:"sessionId"`
			Status       string            `json:"status"`
			LastSeq      uint64            `json:"lastSeq"`
			LastActivity time.Time         `json:"lastActivity"`
			Title        string            `json:"title"`
			Agent        string            `json:"agent"`
			Labels       map[string]string `json:"labels"`
		} `json:"sessions"`
		Next string `json:"next"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&page); err != nil {
		return nil, fmt.Errorf("the projector's session list: %w", err)
	}
	out := []map[string]any{}
	for _, s := range page.Sessions {
		cwd := s.Labels["cwd"]
		if !strings.HasPrefix(cwd, "/") {
			cwd = "/"
		}
		title := s.Title
		if title == "" {
			title = s.SessionID
		}
		out = append(out, map[string]any{
			"sessionId": s.SessionID,
			"cwd":       cwd,
			"title":     title,
			"updatedAt": s.LastActivity.UTC().Format(time.RFC3339Nano),
			"_meta": map[string]any{acp.MetaKey: map[string]any{
				"status": s.Status, "agent": s.Agent, "lastSeq": s.LastSeq, "labels": s.Labels,
			}},
		})
	}
	res := map[string]any{"sessions": out}
	if page.Next != "" {
		res["nextCursor"] = page.Next
	}
	return res, nil
}

// load is session/load: the session's notifications, all sent before the
// reply as ACP requires, then a follow that adds those of new events
// while the editor has it open (until it loads the session again or
// closes stdin).
func (a *acpAgent) load(ctx context.Context, params json.RawMessage) (any, error) {
	var p struct {
		SessionID string `json:"sessionId"`
	}
	if json.Unmarshal(params, &p) != nil || p.SessionID == "" {
		return nil, &rpcError{Code: rpcInvalidParams, Message: "session/load needs sessionId"}
	}
	id := p.SessionID
	last, _, err := a.forward(ctx, id, "/v1/sessions/"+url.PathEscape(id)+"/acp")
	if err != nil {
		return nil, err
	}
	fctx, cancel := context.WithCancel(ctx)
	a.fmu.Lock()
	if prev := a.follows[id]; prev != nil {
		prev()
	}
	a.follows[id] = cancel
	a.fmu.Unlock()
	go a.follow(fctx, id, last)
	return map[string]any{}, nil
}

// follow forwards the session's new notifications, reconnecting after
// the last seq it forwarded when the stream breaks.
func (a *acpAgent) follow(ctx context.Context, id string, last uint64) {
	for ctx.Err() == nil {
		n, ended, err := a.forward(ctx, id, fmt.Sprintf("/v1/sessions/%s/acp?follow=1&after=%d", url.PathEscape(id), last))
		if n > last {
			last = n
		}
		if ended {
			return // the session cannot be read further: said in the last line
		}
		if err != nil && ctx.Err() == nil {
			a.log.Warn("acp: follow", "session", id, "after", last, "err", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(acpRetry):
		}
	}
}

// forward copies the NDJSON notifications of path to the editor and
// returns the last seq they came from, and whether the stream ended at a
// message the session cannot be read past.
func (a *acpAgent) forward(ctx context.Context, id, path string) (last uint64, ended bool, err error) {
	resp, err := a.get(ctx, path)
	if err != nil {
		return 0, false, err
	}
	defer resp.Body.Close()
	r := bufio.NewReaderSize(resp.Body, 64<<10)
	for {
		line, rerr := readLine(r)
		if len(line) > 0 {
			var probe struct {
				Params struct {
					SessionID string `json:"sessionId"`
					Update    struct {
						Meta struct {
							S struct {
								Seq   uint64          `json:"seq"`
								Error json.RawMessage `json:"error"`
							} `json:"sessionlog"`
						} `json:"_meta"`
					} `json:"update"`
				} `json:"params"`
			}
			if json.Unmarshal(line, &probe) != nil || probe.Params.SessionID != id {
				return last, false, fmt.Errorf("the projector sent a line that is not a notification of %s", id)
			}
			a.writeLine(line)
			if s := probe.Params.Update.Meta.S; s.Seq > last {
				last = s.Seq
			} else if len(s.Error) > 0 {
				ended = true
			}
		}
		if errors.Is(rerr, io.EOF) {
			return last, ended, nil
		}
		if rerr != nil {
			return last, ended, rerr
		}
	}
}
