package client

import (
	"encoding/json"
	"reflect"
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
