package schema

import (
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"
)

// minimal is, per registered type, the smallest valid data (required fields
// only) and full adds every optional field.
var minimal = map[string]struct{ data, full string }{
	TypeSessionCreated: {`{}`, `{"title":"t","agent":"a","labels":{"k":"v"},"workspace":"isolated","parent":{"sessionId":"p-1","seedLength":4,"depth":1}}`},
	TypeSessionPaused:  {`{"reason":"lease expired"}`, ``},
	TypeSessionResumed: {`{"by":"alice"}`, ``},
	TypeSessionClosed:  {`{"reason":"done"}`, ``},
	TypeTurnStarted:    {`{}`, `{"input":{"text":"hi"}}`},
	TypeTurnEnded:      {`{"reason":"completed"}`, ``},
	TypeStepStarted:    {`{}`, `{"reason":"plan"}`},
	TypeStepEnded:      {`{}`, `{"reason":"interrupted"}`},
	TypeAttemptStarted: {`{}`, `{"model":"m-1"}`},
	TypeMessageAssistant: {`{"content":"hello"}`,
		`{"content":[{"type":"text","text":"hello"}],"usage":{"in":1,"out":2}}`},
	TypeAttemptInterrupt:  {`{"reason":"network"}`, ``},
	TypeMessageUser:       {`{"content":"hi"}`, ``},
	TypeToolRequested:     {`{"name":"sh","input":{"cmd":"ls"}}`, `{"name":"sh","input":{"cmd":"ls"},"idempotent":true}`},
	TypeToolStarted:       {`{}`, ``},
	TypeToolResult:        {`{"status":"ok"}`, `{"status":"error","output":{"stderr":"x"}}`},
	TypeApprovalRequested: {`{"approvalId":"ap1","prompt":"run ls?"}`, `{"approvalId":"ap1","toolCallId":"c1","prompt":"run ls?"}`},
	TypeApprovalDecided:   {`{"approvalId":"ap1","decision":"approved"}`, `{"approvalId":"ap1","decision":"denied","by":"bob"}`},
	TypeCompactionStarted: {`{"compactionId":"k1","throughSeq":5}`, ``},
	TypeCompactionEnded:   {`{"compactionId":"k1","summary":"s","throughSeq":5}`, ``},
	TypeCompactionAborted: {`{"compactionId":"k1","reason":"oom"}`, ``},
	TypeGoalUpdated: {`{"revision":1,"objective":"o","status":"active"}`,
		`{"revision":2,"objective":"o","acceptance":["a"],"phase":"p","budget":{"usd":1},"status":"blocked","blockedReason":"b"}`},
	TypeJobStarted:     {`{"jobId":"j1"}`, `{"jobId":"j1","command":["make"]}`},
	TypeJobEnded:       {`{"jobId":"j1","status":"exited"}`, `{"jobId":"j1","status":"failed","exitCode":2}`},
	TypeRepairApplied:  {`{"reason":"lease expired","closed":[]}`, `{"reason":"lease expired","closed":[{"kind":"tool_started","id":"c1","turnId":"t1"}],"leaseExpiredAt":"2026-12-02T15:04:05Z","plannedAtSeq":9}`},
	TypeForkCommitted:  {`{"seedLength":4}`, ``},
	TypeSessionTitled:  {`{"title":"t"}`, ``},
	TypeSessionGranted: {`{"grants":["bob"]}`, ``},
	TypeContextRewound: {`{"toEventId":"e3","toSeq":3}`, ``},
	TypeToolLateResult: {`{"toolCallId":"c1","status":"ok"}`, `{"toolCallId":"c1","status":"error","output":"exit 1"}`},
}

var idNames = []struct {
	id   ID
	name string
}{{IDTurn, "turnId"}, {IDStep, "stepId"}, {IDAttempt, "attemptId"}, {IDToolCall, "toolCallId"}}

func setID(e *Envelope, id ID, v string) {
	switch id {
	case IDTurn:
		e.TurnID = v
	case IDStep:
		e.StepID = v
	case IDAttempt:
		e.AttemptID = v
	case IDToolCall:
		e.ToolCallID = v
	}
}

// event builds an agent-style event of typ with the ids its spec requires.
func event(t *testing.T, typ, data string) *Envelope {
	t.Helper()
	e := &Envelope{EventID: "ev1", Type: typ, Data: json.RawMessage(data)}
	if spec, ok := Lookup(typ); ok {
		for _, n := range idNames {
			if spec.IDs&n.id != 0 {
				setID(e, n.id, "x1")
			}
		}
		if spec.ServiceOnly {
			e.Synthetic = true
		}
		e.Ignorable = spec.Ignorable
	}
	return e
}

func originFor(typ string) ValidateOptions {
	if s, _ := Lookup(typ); s != nil && s.ServiceOnly {
		return ValidateOptions{Origin: OriginService}
	}
	return ValidateOptions{}
}

func wantCode(t *testing.T, err error, want Code) {
	t.Helper()
	if want == "" {
		if err != nil {
			t.Fatalf("got %v, want ok", err)
		}
		return
	}
	if err == nil {
		t.Fatalf("got ok, want %s", want)
	}
	if got := CodeOf(err); got != want {
		t.Fatalf("got %s (%v), want %s", got, err, want)
	}
	if !errors.Is(err, &Error{Code: want}) {
		t.Fatalf("errors.Is(%v, %s) is false", err, want)
	}
}

func TestMinimalCoversRegistry(t *testing.T) {
	got := slices.Sorted(maps.Keys(minimal))
	want := Types()
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("test table covers %v, registry has %v", got, want)
	}
}

func TestValidateEveryType(t *testing.T) {
	for _, typ := range Types() {
		m := minimal[typ]
		spec, _ := Lookup(typ)
		t.Run(typ, func(t *testing.T) {
			t.Run("OK/minimal", func(t *testing.T) {
				wantCode(t, Validate(event(t, typ, m.data), originFor(typ)), "")
			})
			if m.full != "" {
				t.Run("OK/optionalFields", func(t *testing.T) {
					wantCode(t, Validate(event(t, typ, m.full), originFor(typ)), "")
				})
			}
			t.Run("OK/noEventID", func(t *testing.T) {
				e := event(t, typ, m.data)
				e.EventID = ""
				wantCode(t, Validate(e, originFor(typ)), "")
			})
			if m.data == "{}" {
				t.Run("OK/absentData", func(t *testing.T) {
					wantCode(t, Validate(event(t, typ, ""), originFor(typ)), "")
				})
			}
			for _, n := range idNames {
				if spec.IDs&n.id != 0 {
					t.Run("InvalidEvent/missing_"+n.name, func(t *testing.T) {
						e := event(t, typ, m.data)
						setID(e, n.id, "")
						err := Validate(e, originFor(typ))
						wantCode(t, err, CodeInvalidEvent)
						if !strings.Contains(err.Error(), "requires "+n.name) {
							t.Fatalf("message %q does not name %s", err, n.name)
						}
					})
					t.Run("InvalidEvent/bad_"+n.name, func(t *testing.T) {
						e := event(t, typ, m.data)
						setID(e, n.id, "a/b")
						wantCode(t, Validate(e, originFor(typ)), CodeInvalidEvent)
					})
					continue
				}
				want := CodeInvalidEvent
				if n.id == IDTurn && spec.OptionalTurn {
					want = ""
				}
				t.Run("Extra_"+n.name+"_"+string(codeName(want)), func(t *testing.T) {
					e := event(t, typ, m.data)
					setID(e, n.id, "x2")
					wantCode(t, Validate(e, originFor(typ)), want)
				})
			}
			var fields map[string]json.RawMessage
			if err := json.Unmarshal([]byte(m.data), &fields); err != nil {
				t.Fatal(err)
			}
			for f := range fields {
				t.Run("InvalidEvent/missing_data."+f, func(t *testing.T) {
					d := maps.Clone(fields)
					delete(d, f)
					b, _ := json.Marshal(d)
					err := Validate(event(t, typ, string(b)), originFor(typ))
					wantCode(t, err, CodeInvalidEvent)
					if !strings.Contains(err.Error(), f) {
						t.Fatalf("message %q does not name %s", err, f)
					}
				})
			}
			t.Run("InvalidEvent/unknownDataField", func(t *testing.T) {
				d := maps.Clone(fields)
				if d == nil {
					d = map[string]json.RawMessage{}
				}
				d["bogus"] = json.RawMessage(`1`)
				b, _ := json.Marshal(d)
				wantCode(t, Validate(event(t, typ, string(b)), originFor(typ)), CodeInvalidEvent)
			})
			t.Run("InvalidEvent/dataNotObject", func(t *testing.T) {
				wantCode(t, Validate(event(t, typ, `[]`), originFor(typ)), CodeInvalidEvent)
			})
			t.Run("InvalidEvent/ignorableFlagWrong", func(t *testing.T) {
				e := event(t, typ, m.data)
				e.Ignorable = !spec.Ignorable
				wantCode(t, Validate(e, originFor(typ)), CodeInvalidEvent)
			})
			if spec.ServiceOnly {
				t.Run("InvalidEvent/fromAgent", func(t *testing.T) {
					e := event(t, typ, m.data)
					e.Synthetic = false
					err := Validate(e, ValidateOptions{Origin: OriginAgent})
					wantCode(t, err, CodeInvalidEvent)
				})
			} else {
				t.Run("OK/syntheticFromService", func(t *testing.T) {
					e := event(t, typ, m.data)
					e.Synthetic = true
					wantCode(t, Validate(e, ValidateOptions{Origin: OriginService}), "")
				})
			}
			t.Run("InvalidEvent/syntheticFromAgent", func(t *testing.T) {
				e := event(t, typ, m.data)
				e.Synthetic = true
				wantCode(t, Validate(e, ValidateOptions{Origin: OriginAgent}), CodeInvalidEvent)
			})
		})
	}
}

func codeName(c Code) Code {
	if c == "" {
		return "ok"
	}
	return c
}

func TestValidateDataValues(t *testing.T) {
	for _, tc := range []struct {
		name, typ, data string
		want            Code
	}{
		{"InvalidEvent/turnReason", TypeTurnEnded, `{"reason":"done"}`, CodeInvalidEvent},
		{"OK/turnReasonInterrupted", TypeTurnEnded, `{"reason":"interrupted"}`, ""},
		{"OK/turnReasonAborted", TypeTurnEnded, `{"reason":"aborted"}`, ""},
		{"OK/turnReasonFailed", TypeTurnEnded, `{"reason":"failed"}`, ""},
		{"InvalidEvent/toolStatus", TypeToolResult, `{"status":"OK"}`, CodeInvalidEvent},
		{"InvalidEvent/toolStatusEmpty", TypeToolResult, `{"status":""}`, CodeInvalidEvent},
		{"OK/toolNotStarted", TypeToolResult, `{"status":"not_started"}`, ""},
		{"OK/toolOutcomeUnknown", TypeToolResult, `{"status":"outcome_unknown"}`, ""},
		{"InvalidEvent/decision", TypeApprovalDecided, `{"approvalId":"a","decision":"maybe"}`, CodeInvalidEvent},
		{"OK/decisionExpired", TypeApprovalDecided, `{"approvalId":"a","decision":"expired"}`, ""},
		{"InvalidEvent/approvalIdBad", TypeApprovalDecided, `{"approvalId":"a b","decision":"denied"}`, CodeInvalidEvent},
		{"InvalidEvent/approvalToolCallBad", TypeApprovalRequested, `{"approvalId":"a","prompt":"p","toolCallId":"c*"}`, CodeInvalidEvent},
		{"InvalidEvent/jobStatus", TypeJobEnded, `{"jobId":"j","status":"killed"}`, CodeInvalidEvent},
		{"OK/jobOrphaned", TypeJobEnded, `{"jobId":"j","status":"orphaned"}`, ""},
		{"InvalidEvent/goalStatus", TypeGoalUpdated, `{"revision":1,"objective":"o","status":"finished"}`, CodeInvalidEvent},
		{"OK/goalDone", TypeGoalUpdated, `{"revision":1,"objective":"o","status":"done"}`, ""},
		{"OK/goalPaused", TypeGoalUpdated, `{"revision":1,"objective":"o","status":"paused"}`, ""},
		{"InvalidEvent/goalRevisionZero", TypeGoalUpdated, `{"revision":0,"objective":"o","status":"active"}`, CodeInvalidEvent},
		{"InvalidEvent/goalRevisionString", TypeGoalUpdated, `{"revision":"1","objective":"o","status":"active"}`, CodeInvalidEvent},
		{"InvalidEvent/workspace", TypeSessionCreated, `{"workspace":"private"}`, CodeInvalidEvent},
		{"OK/workspaceShared", TypeSessionCreated, `{"workspace":"shared"}`, ""},
		{"InvalidEvent/parentSessionID", TypeSessionCreated, `{"parent":{"sessionId":"a.b","seedLength":1,"depth":1}}`, CodeInvalidEvent},
		{"InvalidEvent/parentSeedLength", TypeSessionCreated, `{"parent":{"sessionId":"p","seedLength":0,"depth":1}}`, CodeInvalidEvent},
		{"InvalidEvent/parentDepth", TypeSessionCreated, `{"parent":{"sessionId":"p","seedLength":2,"depth":0}}`, CodeInvalidEvent},
		{"InvalidEvent/parentUnknownField", TypeSessionCreated, `{"parent":{"sessionId":"p","seedLength":2,"depth":1,"x":1}}`, CodeInvalidEvent},
		{"InvalidEvent/throughSeqZero", TypeCompactionStarted, `{"compactionId":"k","throughSeq":0}`, CodeInvalidEvent},
		{"InvalidEvent/throughSeqNegative", TypeCompactionStarted, `{"compactionId":"k","throughSeq":-1}`, CodeInvalidEvent},
		{"InvalidEvent/seedLengthZero", TypeForkCommitted, `{"seedLength":0}`, CodeInvalidEvent},
		{"InvalidEvent/repairClosedNull", TypeRepairApplied, `{"reason":"r","closed":null}`, CodeInvalidEvent},
		{"InvalidEvent/repairClosedItemNoID", TypeRepairApplied, `{"reason":"r","closed":[{"kind":"job"}]}`, CodeInvalidEvent},
		{"InvalidEvent/repairClosedItemUnknownField", TypeRepairApplied, `{"reason":"r","closed":[{"kind":"job","id":"j","x":1}]}`, CodeInvalidEvent},
		{"InvalidEvent/contentNull", TypeMessageUser, `{"content":null}`, CodeInvalidEvent},
		{"InvalidEvent/toolInputNull", TypeToolRequested, `{"name":"sh","input":null}`, CodeInvalidEvent},
		// encoding/json matches keys case-insensitively: other readers do not.
		{"InvalidEvent/keyCase", TypeSessionPaused, `{"Reason":"r"}`, CodeInvalidEvent},
		{"InvalidEvent/keyCaseTwice", TypeSessionPaused, `{"reason":"a","REASON":"b"}`, CodeInvalidEvent},
		{"InvalidEvent/nestedKeyCase", TypeSessionCreated, `{"parent":{"SessionId":"p","seedLength":2,"depth":1}}`, CodeInvalidEvent},
		{"InvalidEvent/listKeyCase", TypeRepairApplied, `{"reason":"r","closed":[{"Kind":"job","id":"j"}]}`, CodeInvalidEvent},
		{"InvalidEvent/duplicatedKey", TypeSessionPaused, `{"reason":"a","reason":"b"}`, CodeInvalidEvent},
		{"InvalidEvent/invalidUTF8", TypeSessionPaused, "{\"reason\":\"\xff\"}", CodeInvalidEvent},
		{"InvalidEvent/trailingData", TypeSessionPaused, `{"reason":"a"}]`, CodeInvalidEvent},
		{"OK/nullData", TypeToolStarted, `null`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantCode(t, Validate(event(t, tc.typ, tc.data), originFor(tc.typ)), tc.want)
		})
	}
}

func TestValidateEnvelope(t *testing.T) {
	stored := func() *Envelope {
		return &Envelope{SchemaVersion: 1, SessionID: "s-1", Seq: 3, EventID: "01JF3K9AB7Q2",
			Time: time.Date(2026, 12, 2, 15, 4, 5, 0, time.UTC), Type: TypeMessageUser, Data: json.RawMessage(`{"content":"x"}`)}
	}
	agent, service, st := ValidateOptions{}, ValidateOptions{Origin: OriginService}, ValidateOptions{Stored: true}
	big := `{"content":"` + strings.Repeat("a", DefaultMaxEventBytes) + `"}`
	for _, tc := range []struct {
		name string
		mod  func(e *Envelope)
		opt  ValidateOptions
		want Code
	}{
		{"OK/stored", nil, st, ""},
		{"OK/request", func(e *Envelope) { e.SchemaVersion, e.Seq, e.Time, e.SessionID = 0, 0, time.Time{}, "" }, agent, ""},
		{"InvalidEvent/storedNoSeq", func(e *Envelope) { e.Seq = 0 }, st, CodeInvalidEvent},
		{"InvalidEvent/storedNoTime", func(e *Envelope) { e.Time = time.Time{} }, st, CodeInvalidEvent},
		{"InvalidEvent/storedNoEventID", func(e *Envelope) { e.EventID = "" }, st, CodeInvalidEvent},
		{"InvalidEvent/storedNoSessionID", func(e *Envelope) { e.SessionID = "" }, st, CodeInvalidEvent},
		{"InvalidEvent/storedOldVersion", func(e *Envelope) { e.SchemaVersion = 0 }, st, CodeInvalidEvent},
		{"InvalidEvent/newerVersion", func(e *Envelope) { e.SchemaVersion = 2 }, agent, CodeInvalidEvent},
		{"InvalidEvent/negativeVersion", func(e *Envelope) { e.SchemaVersion = -1 }, agent, CodeInvalidEvent},
		{"InvalidEvent/sessionIDDot", func(e *Envelope) { e.SessionID = "s.1" }, agent, CodeInvalidEvent},
		{"InvalidEvent/sessionIDStar", func(e *Envelope) { e.SessionID = "s*" }, agent, CodeInvalidEvent},
		{"InvalidEvent/sessionIDGT", func(e *Envelope) { e.SessionID = ">" }, agent, CodeInvalidEvent},
		{"InvalidEvent/sessionIDSpace", func(e *Envelope) { e.SessionID = "s 1" }, agent, CodeInvalidEvent},
		{"InvalidEvent/sessionIDColon", func(e *Envelope) { e.SessionID = "s:1" }, agent, CodeInvalidEvent},
		{"InvalidEvent/sessionIDTooLong", func(e *Envelope) { e.SessionID = strings.Repeat("s", 129) }, agent, CodeInvalidEvent},
		{"OK/sessionIDLongest", func(e *Envelope) { e.SessionID = strings.Repeat("s", 128) }, agent, ""},
		{"InvalidEvent/storedSessionIDDot", func(e *Envelope) { e.SessionID = "s.1" }, st, CodeInvalidEvent},
		{"InvalidEvent/eventIDSpace", func(e *Envelope) { e.EventID = "a b" }, agent, CodeInvalidEvent},
		{"InvalidEvent/eventIDTooLong", func(e *Envelope) { e.EventID = strings.Repeat("e", 129) }, agent, CodeInvalidEvent},
		{"InvalidEvent/noType", func(e *Envelope) { e.Type = "" }, agent, CodeInvalidEvent},
		{"InvalidEvent/typeShape", func(e *Envelope) { e.Type = "Message" }, agent, CodeInvalidEvent},
		{"InvalidEvent/turnIDOnNoTurnType", func(e *Envelope) {
			e.Type, e.TurnID, e.Data = TypeGoalUpdated, "t1", json.RawMessage(minimal[TypeGoalUpdated].data)
		}, agent, CodeInvalidEvent},
		{"UnknownType", func(e *Envelope) { e.Type = "thing/happened" }, agent, CodeUnknownType},
		{"OK/unknownIgnorable", func(e *Envelope) {
			e.Type, e.Ignorable, e.Data = "stats/tokens", true, json.RawMessage(`{"n":1,"any":{"x":[1]}}`)
		}, agent, ""},
		{"OK/unknownIgnorableStored", func(e *Envelope) { e.Type, e.Ignorable = "stats/tokens", true }, st, ""},
		{"InvalidEvent/unknownIgnorableBadData", func(e *Envelope) {
			e.Type, e.Ignorable, e.Data = "stats/tokens", true, json.RawMessage(`{"n":1,"n":2}`)
		}, agent, CodeInvalidEvent},
		{"InvalidEvent/unknownIgnorableDataNotObject", func(e *Envelope) { e.Type, e.Ignorable, e.Data = "stats/tokens", true, json.RawMessage(`7`) }, agent, CodeInvalidEvent},
		{"InvalidEvent/unknownIgnorableSyntheticFromAgent", func(e *Envelope) { e.Type, e.Ignorable, e.Synthetic = "stats/tokens", true, true }, agent, CodeInvalidEvent},
		{"InvalidEvent/knownMarkedIgnorable", func(e *Envelope) { e.Ignorable = true }, agent, CodeInvalidEvent},
		{"InvalidEvent/agentSynthetic", func(e *Envelope) { e.Synthetic = true }, agent, CodeInvalidEvent},
		{"OK/serviceSynthetic", func(e *Envelope) { e.Synthetic = true }, service, ""},
		{"InvalidEvent/agentRepairApplied", func(e *Envelope) {
			e.Type, e.Data = TypeRepairApplied, json.RawMessage(minimal[TypeRepairApplied].data)
		}, agent, CodeInvalidEvent},
		{"InvalidEvent/agentForkCommitted", func(e *Envelope) {
			e.Type, e.Data = TypeForkCommitted, json.RawMessage(minimal[TypeForkCommitted].data)
		}, agent, CodeInvalidEvent},
		{"OK/serviceRepairApplied", func(e *Envelope) {
			e.Type, e.Data, e.Synthetic = TypeRepairApplied, json.RawMessage(minimal[TypeRepairApplied].data), true
		}, service, ""},
		{"OK/serviceForkCommitted", func(e *Envelope) {
			e.Type, e.Data, e.Synthetic = TypeForkCommitted, json.RawMessage(minimal[TypeForkCommitted].data), true
		}, service, ""},
		{"TooLarge/defaultLimit", func(e *Envelope) { e.Data = json.RawMessage(big) }, agent, CodeTooLarge},
		{"OK/noLimit", func(e *Envelope) { e.Data = json.RawMessage(big) }, ValidateOptions{MaxEventBytes: -1}, ""},
		{"TooLarge/data", func(e *Envelope) { e.Data = json.RawMessage(`{"content":"` + strings.Repeat("a", 100) + `"}`) }, ValidateOptions{MaxEventBytes: 100}, CodeTooLarge},
		// The limit is on the stored (encoded) event: "<" is stored as \u003c.
		{"TooLarge/encoded", func(e *Envelope) { e.Data = json.RawMessage(`{"content":"` + strings.Repeat("<", 200) + `"}`) }, ValidateOptions{MaxEventBytes: 1000}, CodeTooLarge},
		{"OK/underLimit", func(e *Envelope) { e.Data = json.RawMessage(`{"content":"` + strings.Repeat("a", 200) + `"}`) }, ValidateOptions{MaxEventBytes: 1000}, ""},
		{"TooLarge/unknownIgnorable", func(e *Envelope) {
			e.Type, e.Ignorable, e.Data = "stats/x", true, json.RawMessage(`{"a":"`+strings.Repeat("a", 200)+`"}`)
		}, ValidateOptions{MaxEventBytes: 100}, CodeTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := stored()
			if tc.mod != nil {
				tc.mod(e)
			}
			wantCode(t, Validate(e, tc.opt), tc.want)
		})
	}
}

func TestErrors(t *testing.T) {
	err := Errorf(CodeConflict, "seq %d", 3).WithIndex(2)
	if got, want := err.Error(), "conflict: event 2: seq 3"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	wrapped := errors.Join(errors.New("x"), err)
	if CodeOf(wrapped) != CodeConflict || !errors.Is(wrapped, &Error{Code: CodeConflict}) {
		t.Fatalf("wrapped code lost: %v", wrapped)
	}
	if errors.Is(err, &Error{Code: CodeClosed}) {
		t.Fatal("matched another code")
	}
	if CodeOf(errors.New("plain")) != CodeInternal {
		t.Fatal("plain error is not internal")
	}
	if got := Errorf(CodeBadRequest, "x").Error(); got != "bad_request: x" {
		t.Fatalf("got %q", got)
	}
	if len(Codes) != 19 || !slices.Contains(Codes, CodeUnsafeCut) || !slices.Contains(Codes, CodeForbidden) {
		t.Fatalf("codes: %v", Codes)
	}
}
