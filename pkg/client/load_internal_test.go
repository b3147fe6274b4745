package client

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// A read reply decodes to what json.Unmarshal gives, whether it is in the
// writer's layout (cut out of it) or not (decoded by json.Unmarshal).
func TestUncheckedReplyDecodesAsJSON(t *testing.T) {
	for _, b := range []string{
		`{"sessionId":"s-1","events":[],"lastSeq":0,"more":false}`,
		`{"sessionId":"s-1","events":[{"a":"}]\"{"},{"b":[{"c":1}]}],"lastSeq":9,"more":true}`,
		`{"sessionId":"s-1","events":[{"a":"x\\"}],"lastSeq":18446744073709551615,"more":false}`,
		`{ "sessionId":"s-1","events":[{"a":1}],"lastSeq":2,"more":false}`,
		`{"events":[{"a":1}],"sessionId":"s-1","more":true,"lastSeq":2}`,
		`{"sessionId":"s-1","events":[{"a":1} ,{"b":2}],"lastSeq":2,"more":false}`,
	} {
		var want uncheckedReply
		if err := json.Unmarshal([]byte(b), &want.ReadReply); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		var got uncheckedReply
		if err := got.decodeReply([]byte(b)); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: got %+v, want %+v", b, got, want)
		}
	}
	var r uncheckedReply
	if err := r.decodeReply([]byte(`{"sessionId":"s-1","events":[{"a":1}`)); err == nil {
		t.Fatal("a cut reply decoded")
	}
}

// BenchmarkReadReplyDecode shows what cutting a read reply's events out
// of the writer's layout buys over json.Unmarshal, on a page of 500
// events of about 400 bytes (the decoded events are checked by
// schema.Decode either way).
func BenchmarkReadReplyDecode(b *testing.B) {
	var page struct {
		SessionID string            `json:"sessionId"`
		Events    []json.RawMessage `json:"events"`
		LastSeq   uint64            `json:"lastSeq"`
		More      bool              `json:"more"`
	}
	page.SessionID, page.LastSeq, page.More = "s-1", 500, true
	for i := range 500 {
		ev, _ := json.Marshal(map[string]any{"schemaVersion": 1, "sessionId": "s-1", "seq": i + 1, "eventId": "e-" + strings.Repeat("x", 20),
			"type": "message/user", "turnId": "t-1", "data": map[string]any{"content": strings.Repeat("a \"quoted\" word ", 20)}})
		page.Events = append(page.Events, ev)
	}
	body, err := json.Marshal(page)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("cut", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			var r uncheckedReply
			if !r.cut(body) {
				b.Fatal("not in the writer's layout")
			}
		}
	})
	b.Run("json.Unmarshal", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			var r uncheckedReply
			if err := json.Unmarshal(body, &r.ReadReply); err != nil {
				b.Fatal(err)
			}
		}
	})
}
