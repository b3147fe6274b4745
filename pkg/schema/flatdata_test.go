package schema

import (
	"encoding/json"
	"reflect"
	"testing"
)

// flatDecoders make flat data types and one that is not, for the tests
// below.
func flatDecoders() []func() any {
	return []func() any{
		func() any { return new(Message) },
		func() any { return new(ToolResult) },
		func() any { return new(ApprovalDecided) },
		func() any { return new(Reason) },
		func() any { return new(TurnStarted) },
		func() any { return new(ToolRequested) },     // a bool
		func() any { return new(CompactionStarted) }, // a number: not flat
	}
}

// checkFlat holds decodeFlat to the general path (json.Unmarshal and the
// exact-name check): whatever it takes, the general path takes with an
// equal value.
func checkFlat(t *testing.T, doc []byte, mk func() any) bool {
	t.Helper()
	got := mk()
	if !decodeFlat(doc, got) {
		return false
	}
	want := mk()
	if err := json.Unmarshal(doc, want); err != nil {
		t.Fatalf("fast path took %s, json.Unmarshal refuses it: %v", doc, err)
	}
	if err := exactNames(doc, reflect.TypeOf(want), ""); err != nil {
		t.Fatalf("fast path took %s, the name check refuses it: %v", doc, err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s: fast %#v, general %#v", doc, got, want)
	}
	return true
}

func TestDecodeFlat(t *testing.T) {
	for _, tc := range []struct {
		doc  string
		fast bool
	}{
		{`{"content":"hi","usage":{"in":1,"out":[2,3]}}`, true},
		{`{"content":[{"type":"text","text":"é"}]}`, true},
		{`{}`, true},
		{`{"status":"ok","output":null}`, false}, // null: the general path
		{`{"status":"o\nk"}`, false},             // escape in a string field
		{`{"status":1}`, false},                  // not a string
		{`{"Status":"ok"}`, false},               // spelling
		{`{"content":"a","content":"b"}`, false}, // duplicated
		{`{"content":"a" }`, false},              // not compact
		{`{"content":"a","extra":1}`, false},     // unknown
		{`["content"]`, false},
		{`{"content":"a"`, false},
		{`{"content":"a"}x`, false},
	} {
		var anyFast bool
		for _, mk := range flatDecoders() {
			if checkFlat(t, []byte(tc.doc), mk) {
				anyFast = true
			}
		}
		if anyFast != tc.fast {
			t.Errorf("%s: fast path %v, want %v", tc.doc, anyFast, tc.fast)
		}
	}
	for _, doc := range []string{`{"name":"x","input":{},"idempotent":true}`, `{"name":"x","input":{},"idempotent":false}`} {
		if !checkFlat(t, []byte(doc), func() any { return new(ToolRequested) }) {
			t.Errorf("fast path refused %s", doc)
		}
	}
	for _, doc := range []string{`{"name":"x","idempotent":1}`, `{"name":"x","idempotent":"true"}`, `{"name":"x","idempotent":null}`, `{"name":"x","idempotent":tru}`} {
		if checkFlat(t, []byte(doc), func() any { return new(ToolRequested) }) {
			t.Errorf("fast path took %s", doc)
		}
	}
	if decodeFlat([]byte(`{"compactionId":"c","throughSeq":3}`), new(CompactionStarted)) {
		t.Error("fast path took a struct with a number field")
	}
}

func FuzzDecodeFlat(f *testing.F) {
	for _, s := range []string{
		`{"content":"hi","usage":{"in":1}}`, `{"status":"ok","output":[1,"x",{"a":null}]}`,
		`{"approvalId":"a1","decision":"approved","by":"me"}`, `{"reason":"ü"}`, `{"input":"x"}`,
		`{"name":"t","input":{"a":1},"idempotent":true}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		for _, mk := range flatDecoders() {
			checkFlat(t, doc, mk)
		}
	})
}
