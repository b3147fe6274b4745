package api_test

import (
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/sessionlog/sessionlog/pkg/api"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

func u64(n uint64) *uint64 { return &n }
func intp(n int) *int      { return &n }

// The JSON of every request and reply, byte for byte: the examples of
// DESIGN.md where it gives one (sections 4 and 8), else its member lists
// (sections 8, 12, 14) in their order.
func TestShapes(t *testing.T) {
	for _, tc := range []struct {
		name string
		v    any
		want string
	}{
		{"AppendRequestAfterTail", api.AppendRequest{SessionID: "s-1", Events: []schema.Envelope{}},
			`{"sessionId":"s-1","events":[]}`},
		{"AppendRequestNew", api.AppendRequest{SessionID: "s-1", ExpectedSeq: u64(0), Events: []schema.Envelope{}},
			`{"sessionId":"s-1","expectedSeq":0,"events":[]}`},
		{"AppendReply", api.AppendReply{SessionID: "s-1", FirstSeq: 7, LastSeq: 7, StreamSeq: 1234, Hash: "3cac97db9ab26cb737af1b13c45d1502"},
			`{"sessionId":"s-1","firstSeq":7,"lastSeq":7,"streamSeq":1234,"duplicate":false,"hash":"3cac97db9ab26cb737af1b13c45d1502"}`},
		{"ErrorConflict", api.ErrorBody{Error: api.ErrorDetail{Code: api.CodeConflict, Message: "...", CurrentSeq: u64(8)}},
			`{"error":{"code":"conflict","message":"...","currentSeq":8}}`},
		{"ErrorIndex", api.ErrorBody{Error: api.ErrorDetail{Code: api.CodeInvalidEvent, Message: "m", Index: intp(0)}},
			`{"error":{"code":"invalid_event","message":"m","index":0}}`},
		{"ErrorUnsafeCut", api.ErrorBody{Error: api.ErrorDetail{Code: api.CodeUnsafeCut, Message: "m", NearestSafeBefore: u64(4), NearestSafeAfter: u64(9)}},
			`{"error":{"code":"unsafe_cut","message":"m","nearestSafeBefore":4,"nearestSafeAfter":9}}`},
		{"HeartbeatRequest", api.HeartbeatRequest{SessionID: "s-1", Holder: "agent-7"},
			`{"sessionId":"s-1","holder":"agent-7"}`},
		{"HeartbeatReply", api.HeartbeatReply{SessionID: "s-1", Holder: "agent-7", TTLMs: 30000},
			`{"sessionId":"s-1","holder":"agent-7","ttlMs":30000}`},
		{"Lease", api.Lease{Holder: "agent-7", RenewedAt: "2026-01-02T03:04:05Z"},
			`{"holder":"agent-7","renewedAt":"2026-01-02T03:04:05Z"}`},
		{"ForkRequestSeq", api.ForkRequest{ParentID: "p", At: &api.ForkAt{Seq: u64(5)}, ChildID: "c", Workspace: "isolated"},
			`{"parentId":"p","at":{"seq":5},"childId":"c","workspace":"isolated"}`},
		{"ForkRequestTurn", api.ForkRequest{ParentID: "p", At: &api.ForkAt{TurnID: "t1"}},
			`{"parentId":"p","at":{"turnId":"t1"}}`},
		{"ForkRequestDefault", api.ForkRequest{ParentID: "p"}, `{"parentId":"p"}`},
		{"ForkReply", api.ForkReply{ChildID: "c", ParentID: "p", SeedLength: 12, Depth: 1},
			`{"childId":"c","parentId":"p","seedLength":12,"depth":1}`},
		{"RepairRequest", api.RepairRequest{SessionID: "s-1", Force: true}, `{"sessionId":"s-1","force":true}`},
		{"RepairRequestNoForce", api.RepairRequest{SessionID: "s-1"}, `{"sessionId":"s-1"}`},
		{"RepairReply", api.RepairReply{SessionID: "s-1", Repaired: true, FirstSeq: 9, LastSeq: 10, Closed: []schema.Closed{{Kind: "tool", ID: "c1"}}},
			`{"sessionId":"s-1","repaired":true,"firstSeq":9,"lastSeq":10,"closed":[{"kind":"tool","id":"c1"}]}`},
		{"RepairReplyNothing", api.RepairReply{SessionID: "s-1", Closed: []schema.Closed{}},
			`{"sessionId":"s-1","repaired":false,"closed":[]}`},
		{"ReadRequest", api.ReadRequest{SessionID: "s-1", AfterSeq: 1000, Limit: 500},
			`{"sessionId":"s-1","afterSeq":1000,"limit":500}`},
		{"ReadRequestDefaults", api.ReadRequest{SessionID: "s-1"}, `{"sessionId":"s-1"}`},
		{"ReadReply", api.ReadReply{SessionID: "s-1", Events: []json.RawMessage{json.RawMessage(`{"seq":1}`), json.RawMessage(`{"seq":2}`)}, LastSeq: 9, More: true},
			`{"sessionId":"s-1","events":[{"seq":1},{"seq":2}],"lastSeq":9,"more":true}`},
		{"ReadReplyEmpty", api.ReadReply{SessionID: "s-1", Events: []json.RawMessage{}},
			`{"sessionId":"s-1","events":[],"lastSeq":0,"more":false}`},
		{"EraseRequest", api.EraseRequest{SessionID: "s-1", Reason: "gdpr", By: "ops", Cascade: true},
			`{"sessionId":"s-1","reason":"gdpr","by":"ops","cascade":true}`},
		{"EraseReply", api.EraseReply{SessionID: "s-1", Erased: []string{"s-1", "s-2"}, Events: 40},
			`{"sessionId":"s-1","erased":["s-1","s-2"],"events":40}`},
		{"EraseReplyAccepted", api.EraseReply{SessionID: "s-1", Erased: []string{}, State: api.EraseAccepted,
			Jobs: []api.EraseJob{{SessionID: "s-1", Phase: "deleting", Total: 40, Deleted: 12}}},
			`{"sessionId":"s-1","erased":[],"events":0,"state":"accepted","jobs":[{"sessionId":"s-1","phase":"deleting","total":40,"deleted":12,"done":false}]}`},
		{"AuditRecord", api.AuditRecord{SessionID: "s-1", LastSeq: 40, Events: 40, ErasedAt: "2026-01-02T03:04:05Z", By: "ops", Reason: "gdpr", SHA256: "ab"},
			`{"sessionId":"s-1","lastSeq":40,"events":40,"erasedAt":"2026-01-02T03:04:05Z","by":"ops","reason":"gdpr","sha256":"ab"}`},
		{"AuditRecordOwner", api.AuditRecord{SessionID: "s-1", LastSeq: 40, Events: 40, ErasedAt: "2026-01-02T03:04:05Z", By: "ops", Reason: "gdpr", SHA256: "ab",
			Owner: &schema.Owner{Tenant: "acme", Agent: "alice"}, Grants: []string{"bob"}},
			`{"sessionId":"s-1","lastSeq":40,"events":40,"erasedAt":"2026-01-02T03:04:05Z","by":"ops","reason":"gdpr","sha256":"ab","owner":{"tenant":"acme","agent":"alice"},"grants":["bob"]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := json.Marshal(tc.v)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Fatalf("got  %s\nwant %s", got, tc.want)
			}
			// And back: decoding the contract's JSON gives the same value.
			p := reflect.New(reflect.TypeOf(tc.v))
			if err := json.Unmarshal([]byte(tc.want), p.Interface()); err != nil {
				t.Fatal(err)
			}
			again, _ := json.Marshal(p.Elem().Interface())
			if string(again) != tc.want {
				t.Fatalf("round trip %s", again)
			}
		})
	}
}

// The append request of section 4: the example decodes into the type, and
// the type encodes the envelopes as pkg/schema does (every member of a
// stored envelope; the writer fills seq, session id and schema version).
func TestAppendRequest(t *testing.T) {
	const example = `{"sessionId":"s-1","expectedSeq":6,"holder":"agent-7","events":[{"eventId":"...","type":"tool/started","turnId":"t3","toolCallId":"call_9"}]}`
	var req api.AppendRequest
	if err := json.Unmarshal([]byte(example), &req); err != nil {
		t.Fatal(err)
	}
	e := schema.Envelope{EventID: "...", Type: "tool/started", TurnID: "t3", ToolCallID: "call_9"}
	if req.SessionID != "s-1" || req.ExpectedSeq == nil || *req.ExpectedSeq != 6 || req.Holder != "agent-7" ||
		len(req.Events) != 1 || !reflect.DeepEqual(req.Events[0], e) {
		t.Fatalf("decoded %+v", req)
	}
	env, _ := json.Marshal(e)
	want := `{"sessionId":"s-1","expectedSeq":6,"holder":"agent-7","events":[` + string(env) + `]}`
	if got, _ := json.Marshal(req); string(got) != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

// Every code of the contract's tables, spelled as on the wire, once.
func TestCodes(t *testing.T) {
	want := []string{"bad_request", "invalid_event", "unknown_type", "structure", "conflict", "paused", "closed", "forking",
		"too_large", "unreadable", "erased", "not_committed", "outcome_unknown", "not_found", "unsafe_cut", "internal", "rolled_back", "forbidden", "quota_exceeded"}
	have := map[string]bool{}
	for _, c := range api.Codes {
		if have[string(c)] {
			t.Fatalf("%s listed twice", c)
		}
		have[string(c)] = true
	}
	for _, w := range want {
		if !have[w] {
			t.Errorf("Codes lacks %s", w)
		}
	}
	if len(have) != len(want) {
		t.Errorf("Codes has %d codes, want %d", len(have), len(want))
	}
	if api.CodeErased != "erased" || api.CodeUnreadable != "unreadable" {
		t.Fatal("misspelled code")
	}
}

func TestSubjects(t *testing.T) {
	if got := api.EventSubject("s-1"); got != "sessions.ev.s-1" {
		t.Fatal(got)
	}
	if got := api.LiveSubject("s-1"); got != "sessions.live.s-1" {
		t.Fatal(got)
	}
	for got, want := range map[string]string{api.SubjectAppend: "sessions.api.append", api.SubjectHeartbeat: "sessions.api.heartbeat",
		api.SubjectFork: "sessions.api.fork", api.SubjectRepair: "sessions.api.repair", api.SubjectRead: "sessions.api.read",
		api.SubjectErase: "sessions.api.erase", api.LeaseBucket: "SESSION_LEASES", api.StreamName: "SESSIONS"} {
		if got != want {
			t.Errorf("%s, want %s", got, want)
		}
	}
}

// The examples TestShapes and TestAppendRequest hold to are the contract's
// own (docs/DESIGN.md), spelled the same.
func TestExamplesAreTheContracts(t *testing.T) {
	doc, err := os.ReadFile("../../docs/DESIGN.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, ex := range []string{
		`{"sessionId":"s-1","expectedSeq":6,"holder":"agent-7","events":[{"eventId":"...","type":"tool/started","turnId":"t3","toolCallId":"call_9"}]}`,
		`{"sessionId":"s-1","firstSeq":7,"lastSeq":7,"streamSeq":1234,"duplicate":false,"hash":"3cac97db9ab26cb737af1b13c45d1502"}`,
		`{"error":{"code":"conflict","message":"...","currentSeq":8}}`,
		`{"sessionId","afterSeq?":0,"limit?":1000}`,
		`{"sessionId","events":[<stored envelopes>],"lastSeq":N,"more":bool}`,
		`{"parentId","at":{"seq"|"turnId"},"childId?","workspace?"}`,
		`{"childId","parentId","seedLength","depth"}`,
		`{"sessionId","repaired":bool,"firstSeq?","lastSeq?","closed":[...]}`,
		`{"sessionId","reason","by","cascade?":false}`,
		`{"sessionId","erased":[ids],"events":N,"state","jobs":[{"sessionId","phase","total","deleted","done"}]}`,
	} {
		if !strings.Contains(string(doc), ex) {
			t.Errorf("docs/DESIGN.md no longer has %s: update the shapes here and in pkg/api", ex)
		}
	}
}
