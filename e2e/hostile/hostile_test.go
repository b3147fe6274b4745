// Package hostile throws malformed and malicious input at the writer
// (requests on sessions.api.append and sessions.api.fork) and at the
// projector's HTTP API, and checks that each gets a clear error code,
// stores nothing, and leaves every service answering (DESIGN.md section 9:
// "Every malformed input gets a clear error code and stores nothing").
//
// Each case logs one line "HOSTILE input=<name> outcome=<code>" so a run
// doubles as the table of inputs tried and what they got.
package hostile

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/services/forker"
	"github.com/sessionlog/sessionlog/services/projector"
	"github.com/sessionlog/sessionlog/services/writer"
)

// hostileEnv is one node with the writer, the forker and the projector.
type hostileEnv struct {
	nc   *nats.Conn
	st   *logstore.Store
	http *httptest.Server
}

type hostileService interface {
	Run(context.Context) error
	Ready() error
}

func hostileStart(t *testing.T) *hostileEnv {
	t.Helper()
	srv := natstest.RunServer(t)
	nc := natstest.Connect(t, srv)
	ctx, cancel := context.WithCancel(context.Background())
	st, err := logstore.Open(ctx, nc, logstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := writer.New(writer.Config{Store: st, Conn: nc})
	if err != nil {
		t.Fatal(err)
	}
	f, err := forker.New(forker.Config{Store: st, Conn: nc})
	if err != nil {
		t.Fatal(err)
	}
	p, err := projector.New(projector.Config{Store: st, DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 3)
	for _, s := range []hostileService{w, f, p} {
		go func() { done <- s.Run(ctx) }()
	}
	t.Cleanup(func() {
		cancel()
		for range 3 {
			if err := <-done; err != nil {
				t.Errorf("service stopped with %v", err)
			}
		}
	})
	natstest.CheckFor(t, 20*time.Second, 20*time.Millisecond, func() error {
		return errors.Join(w.Ready(), f.Ready(), p.Ready())
	})
	hs := httptest.NewServer(p.Handler())
	t.Cleanup(hs.Close)
	return &hostileEnv{nc: nc, st: st, http: hs}
}

// msgs is the number of messages in the SESSIONS stream.
func (h *hostileEnv) msgs(t *testing.T) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := natstest.JetStream(t, h.nc).Stream(ctx, logstore.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}

// request sends body (and headers) to subject and returns the outcome:
// "ok" or the contract code of the reply, or "client:<error>" when the
// request could not be sent at all.
func (h *hostileEnv) request(t *testing.T, subject string, body []byte, hdr nats.Header) (string, []byte) {
	t.Helper()
	m := nats.NewMsg(subject)
	m.Data = body
	for k, v := range hdr {
		m.Header[k] = v
	}
	rep, err := h.nc.RequestMsg(m, 10*time.Second)
	switch {
	case errors.Is(err, nats.ErrMaxPayload):
		return "client:max_payload", nil
	case err != nil:
		t.Fatalf("request: %v", err)
	}
	var r struct {
		Error *struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal(rep.Data, &r); err != nil {
		t.Fatalf("reply is not JSON: %q", rep.Data)
	}
	if r.Error == nil {
		if rep.Header.Get(micro.ErrorCodeHeader) != "" {
			t.Errorf("success body with error header %q", rep.Header.Get(micro.ErrorCodeHeader))
		}
		return "ok", rep.Data
	}
	if got := rep.Header.Get(micro.ErrorCodeHeader); got != r.Error.Code {
		t.Errorf("error body says %q, header %s says %q", r.Error.Code, micro.ErrorCodeHeader, got)
	}
	return r.Error.Code, rep.Data
}

func hostileAppend(sid string, events ...string) []byte {
	return []byte(fmt.Sprintf(`{"sessionId":%q,"holder":"agent-h","events":[%s]}`, sid, strings.Join(events, ",")))
}

func hostileDeep(n int, open, close string) string {
	return strings.Repeat(open, n) + strings.Repeat(close, n)
}

const created = `{"eventId":"c1","type":"session/created","data":{"title":"t"}}`

func hostileBig(n int) string { return strings.Repeat("x", n) }

// hostileCase is one input.
type hostileCase struct {
	name string
	// subject defaults to sessions.api.append.
	subject string
	body    []byte
	hdr     nats.Header
	// want lists the acceptable outcomes.
	want []string
	// stores is how many events the input may add (0 for a refusal).
	stores uint64
	check  func(t *testing.T, h *hostileEnv, reply []byte)
}

func TestHostileWriter(t *testing.T) {
	h := hostileStart(t)
	// A session in good order, for inputs that need one.
	if out, _ := h.request(t, logstore.SubjectAppend, hostileAppend("h-good", created,
		`{"eventId":"g2","type":"turn/started","turnId":"t1"}`,
		`{"eventId":"g3","type":"message/user","turnId":"t1","data":{"content":"hi"}}`,
		`{"eventId":"g4","type":"turn/ended","turnId":"t1","data":{"reason":"completed"}}`), nil); out != "ok" {
		t.Fatalf("seed session: %s", out)
	}
	if out, _ := h.request(t, logstore.SubjectAppend, hostileAppend("h-taken", created), nil); out != "ok" {
		t.Fatalf("seed session: %s", out)
	}
	const maxEvent = schema.DefaultMaxEventBytes
	// An event whose encoded envelope is just under the limit.
	nearMax := func(id string) string {
		return fmt.Sprintf(`{"eventId":%q,"type":"message/user","data":{"content":%q}}`, id, hostileBig(maxEvent-400))
	}
	batchN := 0
	many := func(n int, ev func(i int) string) []byte {
		evs := []string{created}
		for i := 1; i < n; i++ {
			evs = append(evs, ev(i))
		}
		batchN++
		return hostileAppend(fmt.Sprintf("h-batch-%d-%d", batchN, n), evs...)
	}
	small := func(i int) string {
		return fmt.Sprintf(`{"eventId":"m%d","type":"message/user","data":{"content":"m"}}`, i)
	}
	bad := []string{string(schema.CodeBadRequest)}
	invalid := []string{string(schema.CodeInvalidEvent)}
	badOrInvalid := []string{string(schema.CodeBadRequest), string(schema.CodeInvalidEvent)}

	cases := []hostileCase{
		{name: "not_json", body: []byte(`not json`), want: bad},
		{name: "empty_body", body: nil, want: bad},
		{name: "json_array", body: []byte(`[1,2]`), want: bad},
		{name: "trailing_garbage", body: append(hostileAppend("h-1", created), []byte(` {}`)...), want: bad},
		{name: "invalid_utf8_in_string", body: []byte("{\"sessionId\":\"h-1\",\"events\":[{\"type\":\"session/created\",\"data\":{\"title\":\"\xff\xfe\"}}]}"), want: bad},
		{name: "invalid_utf8_in_key", body: []byte("{\"sessionId\":\"h-1\",\"events\":[{\"type\":\"session/created\",\"data\":{\"\xc3\x28\":1}}]}"), want: badOrInvalid},
		{name: "lone_surrogate_escape", body: hostileAppend("h-1a", `{"eventId":"c1","type":"session/created","data":{"title":"\ud800"}}`), want: badOrInvalid},
		{name: "nul_in_string", body: hostileAppend("h-1b", `{"eventId":"c1","type":"session/created","data":{"title":"a\u0000b"}}`), want: []string{"ok", string(schema.CodeBadRequest), string(schema.CodeInvalidEvent)}, stores: 1},
		{name: "deep_nesting_data_65", body: hostileAppend("h-2", `{"eventId":"c1","type":"session/created","data":{"labels":`+hostileDeep(65, `[`, `]`)+`}}`), want: badOrInvalid},
		{name: "deep_nesting_body_100k", body: []byte(hostileDeep(100_000, `[`, `]`)), want: bad},
		{name: "deep_nesting_objects_10k", body: []byte(hostileDeep(10_000, `{"a":`, `}`)), want: bad},
		{name: "dup_key_request", body: []byte(`{"sessionId":"h-3","sessionId":"h-4","events":[` + created + `]}`), want: bad},
		{name: "dup_key_event", body: hostileAppend("h-3", `{"eventId":"c1","type":"session/created","type":"session/closed","data":{}}`), want: bad},
		{name: "dup_key_data", body: hostileAppend("h-3", `{"eventId":"c1","type":"session/created","data":{"title":"a","title":"b"}}`), want: badOrInvalid},
		{name: "case_variant_key_type", body: hostileAppend("h-3", `{"eventId":"c1","type":"session/created","Type":"repair/applied","data":{}}`), want: badOrInvalid},
		{name: "case_variant_key_data", body: hostileAppend("h-3", `{"eventId":"c1","type":"session/created","data":{"title":"a","Title":"b"}}`), want: badOrInvalid},
		{name: "unknown_request_field", body: []byte(`{"sessionId":"h-3","events":[` + created + `],"admin":true}`), want: bad},
		{name: "expectedSeq_negative", body: []byte(`{"sessionId":"h-5","expectedSeq":-1,"events":[` + created + `]}`), want: bad},
		{name: "expectedSeq_2pow64", body: []byte(`{"sessionId":"h-5","expectedSeq":18446744073709551616,"events":[` + created + `]}`), want: bad},
		{name: "expectedSeq_float", body: []byte(`{"sessionId":"h-5","expectedSeq":0.5,"events":[` + created + `]}`), want: bad},
		{name: "expectedSeq_exponent", body: []byte(`{"sessionId":"h-5","expectedSeq":1e400,"events":[` + created + `]}`), want: bad},
		{name: "expectedSeq_string", body: []byte(`{"sessionId":"h-5","expectedSeq":"0","events":[` + created + `]}`), want: bad},
		{name: "expectedSeq_max_uint64", body: []byte(`{"sessionId":"h-good","expectedSeq":18446744073709551615,"events":[{"eventId":"x1","type":"message/user","data":{"content":"x"}}]}`), want: []string{string(schema.CodeConflict)}},
		{name: "seq_negative", body: hostileAppend("h-5", `{"eventId":"c1","seq":-1,"type":"session/created","data":{}}`), want: bad},
		{name: "seq_2pow64", body: hostileAppend("h-5", `{"eventId":"c1","seq":18446744073709551616,"type":"session/created","data":{}}`), want: bad},
		{name: "seq_float", body: hostileAppend("h-5", `{"eventId":"c1","seq":1.5,"type":"session/created","data":{}}`), want: bad},
		{name: "seq_wrong", body: hostileAppend("h-5", `{"eventId":"c1","seq":7,"type":"session/created","data":{}}`), want: []string{string(schema.CodeConflict), string(schema.CodeInvalidEvent), string(schema.CodeStructure)}},
		{name: "seq_max_uint64", body: hostileAppend("h-good", `{"eventId":"x2","seq":18446744073709551615,"type":"message/user","data":{"content":"x"}}`), want: []string{string(schema.CodeConflict), string(schema.CodeInvalidEvent)}},
		{name: "schemaVersion_newer", body: hostileAppend("h-5", `{"eventId":"c1","schemaVersion":2,"type":"session/created","data":{}}`), want: invalid},
		{name: "schemaVersion_negative", body: hostileAppend("h-5", `{"eventId":"c1","schemaVersion":-1,"type":"session/created","data":{}}`), want: invalid},
		{name: "time_garbage", body: hostileAppend("h-5", `{"eventId":"c1","time":"yesterday","type":"session/created","data":{}}`), want: bad},
		{name: "goal_revision_float", body: hostileAppend("h-good", `{"eventId":"x3","type":"goal/updated","data":{"revision":1.5,"objective":"o","status":"active"}}`), want: badOrInvalid},
		{name: "goal_revision_huge", body: hostileAppend("h-good", `{"eventId":"x3","type":"goal/updated","data":{"revision":99999999999999999999,"objective":"o","status":"active"}}`), want: badOrInvalid},
		{name: "compaction_throughSeq_negative", body: hostileAppend("h-good", `{"eventId":"x4","type":"compaction/started","data":{"compactionId":"c","throughSeq":-3}}`), want: badOrInvalid},
		{name: "data_not_object", body: hostileAppend("h-5", `{"eventId":"c1","type":"session/created","data":[1]}`), want: invalid},
		{name: "missing_sessionId", body: []byte(`{"events":[` + created + `]}`), want: bad},
		{name: "no_events", body: []byte(`{"sessionId":"h-5","events":[]}`), want: bad},
	}
	for _, id := range []string{"a.b", "a*", "a>", ">", "*", "a b", "a\tb", "", "../etc", "a/b", "%2e%2e", "sessions.ev.x", strings.Repeat("a", 129), "é"} {
		cases = append(cases, hostileCase{name: "session_id_" + hostileName(id), body: hostileAppend(id, created), want: bad})
	}
	for _, id := range []string{"e*", "e>", "e b", "e/f", "e\n", strings.Repeat("e", 129)} {
		cases = append(cases, hostileCase{name: "event_id_" + hostileName(id), body: hostileAppend("h-6", fmt.Sprintf(`{"eventId":%q,"type":"session/created","data":{}}`, id)), want: invalid})
		cases = append(cases, hostileCase{name: "turn_id_" + hostileName(id), body: hostileAppend("h-good", fmt.Sprintf(`{"eventId":"x5","type":"turn/started","turnId":%q}`, id)), want: invalid})
	}
	cases = append(cases,
		hostileCase{name: "holder_wildcard", body: []byte(`{"sessionId":"h-6","holder":"a>","events":[` + created + `]}`), want: bad},
		hostileCase{name: "holder_dot_star", body: []byte(`{"sessionId":"h-6","holder":"*.>","events":[` + created + `]}`), want: bad},
		// Only the services write repair and fork records or synthetic events.
		hostileCase{name: "agent_repair_applied", body: hostileAppend("h-good", `{"eventId":"x6","type":"repair/applied","data":{"reason":"r","closed":[]}}`), want: invalid},
		hostileCase{name: "agent_fork_committed", body: hostileAppend("h-good", `{"eventId":"x7","type":"fork/committed","data":{"seedLength":3}}`), want: invalid},
		hostileCase{name: "agent_synthetic_true", body: hostileAppend("h-good", `{"eventId":"x8","type":"message/user","synthetic":true,"data":{"content":"x"}}`), want: invalid},
		hostileCase{name: "agent_synthetic_closer_on_paused", body: hostileAppend("h-good", `{"eventId":"x9","type":"session/paused","data":{"reason":"r"}}`, `{"eventId":"x10","type":"turn/ended","turnId":"t1","synthetic":true,"data":{"reason":"interrupted"}}`), want: invalid},
		hostileCase{name: "agent_created_as_fork_child", body: hostileAppend("h-7", `{"eventId":"c1","type":"session/created","data":{"parent":{"sessionId":"h-good","seedLength":4,"depth":1}}}`),
			want: []string{string(schema.CodeInvalidEvent), string(schema.CodeBadRequest)}},
		hostileCase{name: "unknown_type_required", body: hostileAppend("h-good", `{"eventId":"x11","type":"mind/control","data":{}}`), want: []string{string(schema.CodeUnknownType)}},
		hostileCase{name: "known_type_marked_ignorable", body: hostileAppend("h-good", `{"eventId":"x12","type":"message/user","ignorable":true,"data":{"content":"x"}}`), want: invalid},
		hostileCase{name: "type_with_wildcards", body: hostileAppend("h-good", `{"eventId":"x13","type":"a.>/b","ignorable":true,"data":{}}`), want: invalid},
		// Limits: one event over the limit; a request NATS cannot carry.
		hostileCase{name: "event_over_limit", body: hostileAppend("h-8", fmt.Sprintf(`{"eventId":"c1","type":"session/created","data":{"title":%q}}`, hostileBig(maxEvent+1))), want: []string{string(schema.CodeTooLarge)}},
		// Data under the limit, the stored envelope around it over it.
		hostileCase{name: "envelope_over_limit", body: hostileAppend("h-8", fmt.Sprintf(`{"eventId":"c1","type":"session/created","data":{"title":%q}}`, hostileBig(maxEvent-40))), want: []string{string(schema.CodeTooLarge)}},
		hostileCase{name: "batch_1001_events", body: many(1001, small), want: []string{string(schema.CodeTooLarge)}},
		// 1000 maximal events are 256 MiB: no NATS request carries that
		// (max_payload defaults to 1 MiB), so the client refuses it
		// before a byte is sent. Five already do not fit; three do.
		hostileCase{name: "batch_5_max_events", body: many(6, func(i int) string { return nearMax(fmt.Sprintf("m%d", i)) }), want: []string{"client:max_payload"}},
		hostileCase{name: "batch_3_max_events", body: many(3, func(i int) string { return nearMax(fmt.Sprintf("m%d", i)) }), want: []string{"ok"}, stores: 3},
		hostileCase{name: "batch_1000_small_events", body: many(1000, small), want: []string{"ok"}, stores: 1000},
		// The largest 1000-event batch a request can carry: ~1 KiB each.
		hostileCase{name: "batch_1000_fitting_events", body: many(1000, func(i int) string {
			return fmt.Sprintf(`{"eventId":"f%d","type":"message/user","data":{"content":%q}}`, i, hostileBig(940))
		}), want: []string{"ok"}, stores: 1000},
		hostileCase{name: "batch_1000_just_over_payload", body: many(1000, func(i int) string {
			return fmt.Sprintf(`{"eventId":"f%d","type":"message/user","data":{"content":%q}}`, i, hostileBig(1100))
		}), want: []string{"client:max_payload"}},
		hostileCase{name: "batch_dup_event_ids", body: hostileAppend("h-9", created, `{"eventId":"c1","type":"message/user","data":{"content":"x"}}`), want: invalid},
		// Headers a client sets on its request must not reach the stream.
		hostileCase{name: "request_headers_forged", body: hostileAppend("h-good", `{"eventId":"x14","type":"message/user","data":{"content":"x"}}`),
			hdr: nats.Header{
				logstore.HeaderMsgID:       {"h-good:g2"},
				logstore.HeaderExpectedSeq: {"999"},
				logstore.HeaderType:        {schema.TypeRepairApplied},
				logstore.HeaderSeq:         {"1"},
				"SL-Synthetic":             {"true"},
				"Nats-Expected-Stream":     {"OTHER"},
				"Nats-TTL":                 {"1s"},
			}, want: []string{"ok"}, stores: 1, check: func(t *testing.T, h *hostileEnv, _ []byte) {
				tail, err := h.st.Tail(context.Background(), "h-good")
				if err != nil {
					t.Fatal(err)
				}
				m, err := h.st.MsgAt(context.Background(), logstore.StreamName, tail.StreamSeq)
				if err != nil || m == nil {
					t.Fatalf("stored event: %v", err)
				}
				e, err := schema.Decode(m.Data)
				if err != nil {
					t.Fatal(err)
				}
				if e.EventID != "x14" || e.Synthetic || e.Type != schema.TypeMessageUser ||
					m.Header.Get(logstore.HeaderMsgID) != "h-good:x14" || m.Header.Get(logstore.HeaderType) != schema.TypeMessageUser ||
					m.Header.Get(logstore.HeaderSeq) != fmt.Sprint(e.Seq) || m.Header.Get("SL-Synthetic") != "" || m.Header.Get("Nats-TTL") != "" {
					t.Fatalf("forged request headers reached the stream: %+v %v", e, m.Header)
				}
			}},
		// Fork requests.
		hostileCase{name: "fork_parent_wildcard", subject: logstore.SubjectFork, body: []byte(`{"parentId":"a.>"}`), want: bad},
		hostileCase{name: "fork_child_traversal", subject: logstore.SubjectFork, body: []byte(`{"parentId":"h-good","childId":"../x"}`), want: bad},
		hostileCase{name: "fork_at_seq_negative", subject: logstore.SubjectFork, body: []byte(`{"parentId":"h-good","at":{"seq":-1}}`), want: bad},
		hostileCase{name: "fork_at_seq_2pow64", subject: logstore.SubjectFork, body: []byte(`{"parentId":"h-good","at":{"seq":18446744073709551616}}`), want: bad},
		hostileCase{name: "fork_at_seq_beyond", subject: logstore.SubjectFork, body: []byte(`{"parentId":"h-good","at":{"seq":18446744073709551615}}`), want: []string{string(schema.CodeUnsafeCut), string(schema.CodeBadRequest)}},
		hostileCase{name: "fork_child_exists", subject: logstore.SubjectFork, body: []byte(`{"parentId":"h-good","childId":"h-taken"}`), want: []string{string(schema.CodeConflict)}},
		hostileCase{name: "fork_unknown_parent", subject: logstore.SubjectFork, body: []byte(`{"parentId":"h-nobody"}`), want: []string{string(schema.CodeNotFound)}},
		hostileCase{name: "fork_dup_keys", subject: logstore.SubjectFork, body: []byte(`{"parentId":"h-good","parentId":"h-x"}`), want: bad},
		hostileCase{name: "fork_invalid_utf8", subject: logstore.SubjectFork, body: []byte("{\"parentId\":\"h-good\",\"workspace\":\"\xff\"}"), want: bad},
		hostileCase{name: "fork_workspace_bogus", subject: logstore.SubjectFork, body: []byte(`{"parentId":"h-good","workspace":"root"}`), want: bad},
	)

	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			subject := tc.subject
			if subject == "" {
				subject = logstore.SubjectAppend
			}
			before := h.msgs(t)
			out, reply := h.request(t, subject, tc.body, tc.hdr)
			t.Logf("HOSTILE input=%s outcome=%s", tc.name, out)
			if !hostileOneOf(out, tc.want) {
				t.Errorf("outcome %s, want one of %v (reply %.300s)", out, tc.want, reply)
			}
			after := h.msgs(t)
			if out != "ok" && after != before {
				t.Errorf("refused with %s but the stream grew from %d to %d messages", out, before, after)
			}
			if out == "ok" && after-before != tc.stores {
				t.Errorf("stored %d messages, want %d", after-before, tc.stores)
			}
			if tc.check != nil && out == "ok" {
				tc.check(t, h, reply)
			}
			// Still answering: a well-formed request on a fresh session.
			sid := fmt.Sprintf("h-alive-%d", after)
			if got, _ := h.request(t, logstore.SubjectAppend, hostileAppend(sid, created), nil); got != "ok" {
				t.Fatalf("writer stopped answering after %s: %s", tc.name, got)
			}
		})
	}
}

func hostileOneOf(s string, set []string) bool {
	for _, v := range set {
		if s == v {
			return true
		}
	}
	return false
}

// hostileName makes an input readable in a test name and a log line.
func hostileName(s string) string {
	if s == "" {
		return "empty"
	}
	if len(s) > 20 {
		return fmt.Sprintf("%s_x%d", hostileName(s[:4]), len(s))
	}
	var b strings.Builder
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_':
			b.WriteRune(r)
		default:
			fmt.Fprintf(&b, "%%%02x", r)
		}
	}
	return b.String()
}

func TestHostileHTTP(t *testing.T) {
	h := hostileStart(t)
	if out, _ := h.request(t, logstore.SubjectAppend, hostileAppend("h-good", created,
		`{"eventId":"g2","type":"message/user","data":{"content":"hi"}}`), nil); out != "ok" {
		t.Fatalf("seed: %s", out)
	}
	// The projector shows the session before the probes start.
	natstest.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		resp, err := http.Get(h.http.URL + "/v1/sessions/h-good")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		return nil
	})
	noRedirect := &http.Client{Timeout: 5 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	type probe struct {
		name, method, path string
		hdr                map[string]string
		want               []int
	}
	refused := []int{400, 404}
	var probes []probe
	// Path traversal and subject syntax in the id, on every path.
	ids := []struct{ name, raw string }{
		{"dotdot", ".."}, {"dotdot_slash_etc", "../etc/passwd"}, {"enc_dotdot_slash", "%2e%2e%2f"}, {"enc_dotdot_slash_upper", "%2E%2E%2Fetc"},
		{"enc_slash", "a%2Fb"}, {"double_enc", "%252e%252e%252f"}, {"dot", "a.b"}, {"star", "a*"}, {"gt", "a%3E"}, {"nul", "a%00b"},
		{"space", "a%20b"}, {"long", strings.Repeat("a", 200)}, {"backslash", "..%5C..%5C"}, {"utf8_bad", "%ff%fe"},
	}
	suffixes := []string{"", "/events", "/context", "/watch", "/export?format=claude-code"}
	for _, id := range ids {
		for _, sfx := range suffixes {
			probes = append(probes, probe{name: "id_" + id.name + strings.ReplaceAll(sfx, "/", "_"), method: "GET", path: "/v1/sessions/" + id.raw + sfx,
				want: []int{301, 307, 308, 400, 404}})
		}
	}
	probes = append(probes,
		probe{name: "events_after_negative", method: "GET", path: "/v1/sessions/h-good/events?after=-1", want: refused},
		probe{name: "events_after_2pow64", method: "GET", path: "/v1/sessions/h-good/events?after=18446744073709551616", want: refused},
		probe{name: "events_after_float", method: "GET", path: "/v1/sessions/h-good/events?after=1.5", want: refused},
		probe{name: "events_after_text", method: "GET", path: "/v1/sessions/h-good/events?after=abc", want: refused},
		probe{name: "events_limit_negative", method: "GET", path: "/v1/sessions/h-good/events?limit=-1", want: refused},
		probe{name: "events_limit_huge", method: "GET", path: "/v1/sessions/h-good/events?limit=99999999999999999999", want: refused},
		probe{name: "events_after_max_uint64", method: "GET", path: "/v1/sessions/h-good/events?after=18446744073709551615", want: []int{200, 400}},
		probe{name: "list_limit_text", method: "GET", path: "/v1/sessions?limit=ten", want: refused},
		probe{name: "list_limit_negative", method: "GET", path: "/v1/sessions?limit=-5", want: refused},
		probe{name: "list_status_bogus", method: "GET", path: "/v1/sessions?status=%2e%2e", want: refused},
		probe{name: "list_after_bogus", method: "GET", path: "/v1/sessions?after=%ff", want: []int{200, 400}},
		probe{name: "watch_after_max_uint64", method: "GET", path: "/v1/sessions/h-good/watch?after=18446744073709551615", want: refused},
		probe{name: "watch_after_2pow64", method: "GET", path: "/v1/sessions/h-good/watch?after=18446744073709551616", want: refused},
		probe{name: "watch_after_negative", method: "GET", path: "/v1/sessions/h-good/watch?after=-1", want: refused},
		probe{name: "watch_after_beyond_tail", method: "GET", path: "/v1/sessions/h-good/watch?after=3", want: refused},
		probe{name: "watch_last_event_id_huge", method: "GET", path: "/v1/sessions/h-good/watch", hdr: map[string]string{"Last-Event-ID": "99999999999999999999999"}, want: refused},
		probe{name: "watch_last_event_id_text", method: "GET", path: "/v1/sessions/h-good/watch", hdr: map[string]string{"Last-Event-ID": "../../1"}, want: refused},
		probe{name: "watch_unknown_session", method: "GET", path: "/v1/sessions/h-nobody/watch", want: []int{404}},
		probe{name: "session_unknown", method: "GET", path: "/v1/sessions/h-nobody", want: []int{404}},
		probe{name: "export_format_bogus", method: "GET", path: "/v1/sessions/h-good/export?format=..%2f", want: []int{400}},
		probe{name: "export_format_missing", method: "GET", path: "/v1/sessions/h-good/export", want: []int{200}},
		probe{name: "export_unknown_session", method: "GET", path: "/v1/sessions/h-nobody/export?format=claude-code", want: []int{404}},
		probe{name: "post_sessions", method: "POST", path: "/v1/sessions", want: []int{404, 405}},
		probe{name: "delete_session", method: "DELETE", path: "/v1/sessions/h-good", want: []int{404, 405}},
		probe{name: "unknown_api_path", method: "GET", path: "/v1/admin", want: []int{404}},
		probe{name: "root_traversal", method: "GET", path: "/../../etc/passwd", want: []int{301, 307, 308, 400, 404}},
	)
	before := h.msgs(t)
	for _, p := range probes {
		t.Run(p.name, func(t *testing.T) {
			req, err := http.NewRequest(p.method, h.http.URL+p.path, nil)
			if err != nil {
				// The URL itself is refused by the client: nothing reaches the server.
				t.Logf("HOSTILE input=http_%s outcome=client:%v", p.name, err)
				return
			}
			for k, v := range p.hdr {
				req.Header.Set(k, v)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			resp, err := noRedirect.Do(req.WithContext(ctx))
			if err != nil {
				t.Fatalf("%s %s: %v", p.method, p.path, err)
			}
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			code := ""
			var e struct {
				Error *struct {
					Code string `json:"code"`
				} `json:"error"`
			}
			if json.Unmarshal(body, &e) == nil && e.Error != nil {
				code = "/" + e.Error.Code
			}
			t.Logf("HOSTILE input=http_%s outcome=%d%s", p.name, resp.StatusCode, code)
			if !hostileOneOfInt(resp.StatusCode, p.want) {
				t.Errorf("%s %s: status %d, want one of %v (%.200s)", p.method, p.path, resp.StatusCode, p.want, body)
			}
			if resp.StatusCode/100 == 3 {
				// The mux cleans ".." by redirecting: where it sends the
				// client must not serve a session either.
				loc, err := resp.Location()
				if err != nil {
					t.Fatalf("redirect without location: %v", err)
				}
				r2, err := noRedirect.Get(loc.String())
				if err != nil {
					t.Fatal(err)
				}
				r2.Body.Close()
				t.Logf("HOSTILE input=http_%s_redirected outcome=%d", p.name, r2.StatusCode)
				if r2.StatusCode != 404 && r2.StatusCode != 400 && r2.StatusCode/100 != 3 {
					t.Errorf("%s redirects to %s, which answers %d", p.path, loc, r2.StatusCode)
				}
			}
			if resp.StatusCode >= 400 && resp.StatusCode != 405 && strings.HasPrefix(p.path, "/v1/") && code == "" {
				t.Errorf("%s %s: status %d without an error code body: %.200s", p.method, p.path, resp.StatusCode, body)
			}
		})
	}
	if after := h.msgs(t); after != before {
		t.Errorf("HTTP probes changed the stream: %d -> %d messages", before, after)
	}
	resp, err := http.Get(h.http.URL + "/v1/sessions/h-good")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("projector stopped answering: %v %v", err, resp)
	}
	resp.Body.Close()
}

func hostileOneOfInt(v int, set []int) bool {
	for _, s := range set {
		if v == s {
			return true
		}
	}
	return false
}
