package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestCheckJSON(t *testing.T) {
	deep := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	deepObj := func(n int) string { return strings.Repeat(`{"a":`, n) + "1" + strings.Repeat("}", n) }
	for _, tc := range []struct {
		name, doc string
		ok        bool
		msg       string
	}{
		{"OK/object", `{"a":1,"b":[1,2,{"c":null}],"d":{"a":1}}`, true, ""},
		{"OK/scalar", ` 1 `, true, ""},
		{"OK/string", `"x"`, true, ""},
		{"OK/sameKeyInSiblings", `[{"a":1},{"a":2}]`, true, ""},
		{"OK/sameKeyParentAndChild", `{"a":{"a":{"a":1}}}`, true, ""},
		{"OK/keyEqualsValue", `{"a":"a","b":"a"}`, true, ""},
		{"OK/depth64", deep(64), true, ""},
		{"OK/depth64Objects", deepObj(64), true, ""},
		{"OK/escapedUnicode", `{"\u00e9":"\u4e16"}`, true, ""},
		{"Refused/duplicatedKey", `{"a":1,"a":2}`, false, `duplicated key "a"`},
		{"Refused/duplicatedKeyNested", `{"x":[{"b":1,"c":{"a":1,"a":1}}]}`, false, `duplicated key "a"`},
		{"Refused/duplicatedKeyAfterNested", `{"a":{"b":1},"a":2}`, false, `duplicated key "a"`},
		{"Refused/duplicatedKeyEscaped", `{"a":1,"\u0061":2}`, false, `duplicated key "a"`},
		{"Refused/depth65", deep(65), false, "nested deeper"},
		{"Refused/depth65Objects", deepObj(65), false, "nested deeper"},
		{"Refused/invalidUTF8", "{\"a\":\"\xff\"}", false, "UTF-8"},
		{"Refused/invalidUTF8Key", "{\"\xc3\x28\":1}", false, "UTF-8"},
		{"Refused/trailingData", `{"a":1} x`, false, ""},
		{"Refused/trailingBracket", `{"a":1}]`, false, ""},
		{"Refused/twoValues", `{"a":1}{"b":2}`, false, "trailing data"},
		{"Refused/twoScalars", `1 2`, false, "trailing data"},
		{"Refused/empty", ``, false, "empty"},
		{"Refused/whitespace", " \n\t", false, "empty"},
		{"Refused/truncated", `{"a":`, false, ""},
		{"Refused/unclosed", `[1,2`, false, ""},
		{"Refused/badLiteral", `{"a":tru}`, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckJSON([]byte(tc.doc), MaxJSONDepth)
			if tc.ok {
				if err != nil {
					t.Fatalf("got %v, want ok", err)
				}
				return
			}
			if err == nil {
				t.Fatal("got ok, want an error")
			}
			if !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("got %q, want it to mention %q", err, tc.msg)
			}
		})
	}
}

func readTestdata(t testing.TB, pattern string) map[string][]byte {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", pattern))
	if err != nil || len(files) == 0 {
		t.Fatalf("no testdata %s: %v", pattern, err)
	}
	out := map[string][]byte{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out[filepath.Base(f)] = b
	}
	return out
}

func TestDecodeV1(t *testing.T) {
	for name, b := range readTestdata(t, "v1/*.json") {
		t.Run(name, func(t *testing.T) {
			e, err := Decode(b)
			if err != nil {
				t.Fatal(err)
			}
			if err := Validate(&e, ValidateOptions{Stored: true, Origin: OriginService}); err != nil {
				t.Fatal(err)
			}
			checkRoundTrip(t, e)
		})
	}
}

func TestDecodeV0(t *testing.T) {
	b := readTestdata(t, "v0/tool-result-ok.json")["tool-result-ok.json"]
	got, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	want := Envelope{
		SchemaVersion: 1, SessionID: "s-01JF3K8Q", Seq: 7, EventID: "01JF3K9AB7Q2",
		Time: time.Date(2025, 3, 2, 15, 4, 5, 123456000, time.UTC),
		Type: TypeToolResult, TurnID: "t3", ToolCallID: "call_9",
		Data: json.RawMessage(`{"output":{"stdout":"a.txt\n"},"status":"ok"}`),
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %+v\nwant %+v", got, want)
	}
	if err := Validate(&got, ValidateOptions{Stored: true}); err != nil {
		t.Fatal(err)
	}
	var d ToolResult
	if err := got.DecodeData(&d); err != nil || d.Status != ToolOK {
		t.Fatalf("data %+v, %v", d, err)
	}
	checkRoundTrip(t, got)

	t.Run("OKFalseIsError", func(t *testing.T) {
		e, err := Decode(readTestdata(t, "v0/tool-result-failed.json")["tool-result-failed.json"])
		if err != nil {
			t.Fatal(err)
		}
		if string(e.Data) != `{"status":"error"}` {
			t.Fatalf("data %s", e.Data)
		}
	})
	for name, b := range readTestdata(t, "v0/*.json") {
		t.Run("Validates/"+name, func(t *testing.T) {
			e, err := Decode(b)
			if err != nil {
				t.Fatal(err)
			}
			if e.SchemaVersion != Version {
				t.Fatalf("schemaVersion %d", e.SchemaVersion)
			}
			if err := Validate(&e, ValidateOptions{Stored: true}); err != nil {
				t.Fatal(err)
			}
		})
	}
	for _, tc := range []struct{ name, doc string }{
		{"Refused/bothSpellings", `{"session_id":"a","sessionId":"b","seq":1,"event_id":"e","ts":"2025-03-02T15:04:05Z","kind":"session/created"}`},
		{"Refused/kindAndType", `{"session_id":"a","seq":1,"event_id":"e","ts":"2025-03-02T15:04:05Z","kind":"session/created","type":"session/closed"}`},
		{"Refused/okAndStatus", `{"session_id":"a","seq":1,"event_id":"e","ts":"2025-03-02T15:04:05Z","kind":"tool/result","turn_id":"t","tool_call_id":"c","payload":{"ok":true,"status":"error"}}`},
		{"Refused/okNotBool", `{"session_id":"a","seq":1,"event_id":"e","ts":"2025-03-02T15:04:05Z","kind":"tool/result","turn_id":"t","tool_call_id":"c","payload":{"ok":"yes"}}`},
		{"Refused/noKind", `{"session_id":"a","seq":1}`},
		{"Refused/unknownV0Field", `{"session_id":"a","seq":1,"event_id":"e","ts":"2025-03-02T15:04:05Z","kind":"session/created","color":"red"}`},
		{"Refused/negativeVersion", `{"schemaVersion":-1,"sessionId":"a"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if e, err := Decode([]byte(tc.doc)); err == nil {
				t.Fatalf("decoded %+v", e)
			}
		})
	}
}

func TestDecodeRefused(t *testing.T) {
	for _, tc := range []struct{ name, doc, msg string }{
		{"NewerSchema", `{"schemaVersion":2,"sessionId":"s","seq":1,"eventId":"e","time":"2026-12-02T15:04:05Z","type":"x/y","futureField":1}`, "newer"},
		{"DuplicatedKey", `{"schemaVersion":1,"type":"session/created","type":"session/closed"}`, "duplicated"},
		{"UnknownField", `{"schemaVersion":1,"sessionId":"s","seq":1,"eventId":"e","time":"2026-12-02T15:04:05Z","type":"session/created","data":{},"extra":1}`, "unknown field"},
		{"KeyCase", `{"schemaVersion":1,"sessionId":"s","seq":1,"eventId":"e","time":"2026-12-02T15:04:05Z","type":"session/created","Type":"session/closed"}`, "unknown field"},
		{"VersionKeyCase", `{"SchemaVersion":1,"sessionId":"s","seq":1,"eventId":"e","time":"2026-12-02T15:04:05Z","type":"session/created"}`, ""},
		{"NotObject", `[1]`, "object"},
		{"Null", `null`, "object"},
		{"Empty", ``, "empty"},
		{"TwoEvents", `{"schemaVersion":1}{"schemaVersion":1}`, "trailing"},
		{"BadVersion", `{"schemaVersion":"1"}`, "schemaVersion"},
		{"SeqNegative", `{"schemaVersion":1,"sessionId":"s","seq":-1,"eventId":"e","time":"2026-12-02T15:04:05Z","type":"session/created"}`, "seq"},
		{"BadTime", `{"schemaVersion":1,"sessionId":"s","seq":1,"eventId":"e","time":"yesterday","type":"session/created"}`, ""},
		{"TooDeep", `{"schemaVersion":1,"data":` + strings.Repeat("[", 64) + strings.Repeat("]", 64) + `}`, "nested"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, err := Decode([]byte(tc.doc))
			if err == nil {
				t.Fatalf("decoded %+v", e)
			}
			if !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("got %q, want it to mention %q", err, tc.msg)
			}
			if tc.name == "NewerSchema" && !errors.Is(err, ErrNewerSchema) {
				t.Fatalf("%v is not ErrNewerSchema", err)
			}
		})
	}
}

func TestEncodeDecodeRoundTrip(t *testing.T) {
	e := Envelope{
		SchemaVersion: 1, SessionID: "s-1", Seq: 42, EventID: "01JF3K9AB7Q2",
		Time: time.Date(2026, 12, 2, 15, 4, 5, 123456789, time.FixedZone("x", 3600)),
		Type: TypeToolRequested, TurnID: "t3", ToolCallID: "call_9", Synthetic: true,
		Data: json.RawMessage(`{"name":"sh", "input":{"cmd":"echo <hi> & bye"}}`),
	}
	checkRoundTrip(t, e)

	t.Run("EmptyDataIsObject", func(t *testing.T) {
		e := Envelope{SchemaVersion: 1, SessionID: "s", Seq: 1, EventID: "e", Time: time.Now(), Type: TypeSessionCreated}
		b, err := Encode(&e)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(b, []byte(`"data":{}`)) {
			t.Fatalf("%s", b)
		}
		d, err := Decode(b)
		if err != nil {
			t.Fatal(err)
		}
		if err := Validate(&d, ValidateOptions{Stored: true}); err != nil {
			t.Fatal(err)
		}
	})
}

// checkRoundTrip: e encodes, decodes back to an equal envelope (data
// compared as encoding/json renders it), and encoding is then stable.
func checkRoundTrip(t testing.TB, e Envelope) {
	t.Helper()
	orig := e
	b, err := Encode(&e)
	if err != nil {
		t.Fatalf("encode: %v", err)
	}
	got, err := Decode(b)
	if err != nil {
		t.Fatalf("decode of %s: %v", b, err)
	}
	want := orig
	if len(want.Data) == 0 {
		want.Data = json.RawMessage(`{}`)
	}
	wantData, err := json.Marshal(want.Data)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Data, wantData) {
		t.Fatalf("data: got %s, want %s", got.Data, wantData)
	}
	if !got.Time.Equal(want.Time) || got.Time.Format(time.RFC3339Nano) != want.Time.Format(time.RFC3339Nano) {
		t.Fatalf("time: got %v, want %v", got.Time, want.Time)
	}
	b2, err := Encode(&got)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, b2) {
		t.Fatalf("encoding is not stable:\n%s\n%s", b, b2)
	}
	got.Data, want.Data = nil, nil
	got.Time, want.Time = time.Time{}, time.Time{}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %+v\nwant %+v", got, want)
	}
}

func TestUnmarshal(t *testing.T) {
	type req struct {
		SessionID string     `json:"sessionId"`
		Events    []Envelope `json:"events"`
	}
	var r req
	if err := Unmarshal([]byte(`{"sessionId":"s","events":[{"type":"message/user","data":{"content":"x"}}]}`), &r); err != nil {
		t.Fatal(err)
	}
	if r.SessionID != "s" || len(r.Events) != 1 || r.Events[0].Type != TypeMessageUser {
		t.Fatalf("%+v", r)
	}
	for _, doc := range []string{
		`{"sessionId":"s","sessionId":"t"}`,
		`{"sessionId":"s","bogus":1}`,
		`{"sessionId":"s"} {}`,
		`{"sessionId":"s"}]`,
		`{"events":[{"type":1}]}`,
	} {
		if err := Unmarshal([]byte(doc), &r); err == nil {
			t.Errorf("Unmarshal(%s) = ok", doc)
		}
	}
}

func TestUpcastNoMigration(t *testing.T) {
	if _, err := Upcast([]byte(`{}`), Version); err == nil {
		t.Fatal("upcast from the current version")
	}
	if _, err := Upcast([]byte(`{}`), -1); err == nil {
		t.Fatal("upcast from -1")
	}
}

// Data keys must be spelled exactly as a field, at every depth, escaped
// or not; map keys are free.
func TestDataKeysExact(t *testing.T) {
	cases := []struct {
		data string
		ok   bool
	}{
		{`{"title":"t"}`, true},
		{`{"ti\u0074le":"t"}`, true}, // the same key, escaped
		{`{"Title":"t"}`, false},
		{`{"title":"t","extra":1}`, false},
		{`{"labels":{"Any-Key":"v","x":"y"}}`, true},
		{`{"parent":{"sessionId":"p-1","seedLength":1,"depth":1}}`, true},
		{`{"parent":{"SessionId":"p-1","seedLength":1,"depth":1}}`, false},
		{`{"parent":{"sessionId":"p-1","seedLength":1,"depth":1,"x":[{"a":1}]}}`, false},
		{` { "title" : "a,}]\"{" , "agent" : "b" } `, true},
		{`{"parent":null}`, true},
	}
	for _, c := range cases {
		var d SessionCreated
		e := Envelope{Data: json.RawMessage(c.data)}
		err := e.DecodeData(&d)
		if (err == nil) != c.ok {
			t.Errorf("%s: err %v, want ok=%v", c.data, err, c.ok)
		}
	}
}
