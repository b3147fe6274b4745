package claudecode

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// lineSeeds are lines whose message decodeLine may or may not decode in
// the same pass.
var lineSeeds = []string{
	`{"type":"user","uuid":"u1","parentUuid":null,"message":{"role":"user","content":"hi"}}`,
	`{"type":"assistant","uuid":"u2","message":{"id":"m","role":"assistant","content":[{"type":"text","text":"a"}],"stop_reason":null}}`,
	`{"type":"user","message":{"role":"user","content":"a"},"message":{"id":"x"}}`,
	`{"type":"user","message":{"role":"user","content":"a"},"Message":{"id":"x"}}`,
	`{"type":"user","message":{"role":"user","content":"a"},"MESSAGE":null}`,
	`{"type":"user","message":{"role":"user","content":"a"},"me\u017fsage":{"id":"x"}}`,
	"{\"type\":\"user\",\"message\":{\"role\":\"user\",\"content\":\"a\"},\"me\u017fsage\":{\"id\":\"x\"}}",
	`{"type":"user","message":{"role":"user","content":"a"},"m\u0065ssage":{"id":"x"}}`,
	`{"type":"user","message":{"role":"user","content":"\u001b[31m"}}`,
	`{"type":"user","message":null}`, `{"type":"user"}`, `{"type":"user","message":"text"}`,
	`{"type":"user","message":{"content":1}}`, `{"type":"user","message":{"stop_reason":"x","stop_reason":null}}`,
	`{"type":"user","message":{"role":"user"},"uuid":1}`, `{"type":"user","message":{}} x`, `{"type":"user","message":{`,
	`{"type":"summary","summary":"t","toolUseResult":{"message":"x"},"message":{"content":"y"}}`,
	`{"type":"assistant","message":{"id":"m","type":"message","content":[]}}`,
	`{"type":"user","message" :{"role":"user","content":"a"},"MESSAGE"` + "\n\t:" + `{"id":"x"}}`,
	`{"type":"message","message":"message","Message":{"id":"x"}}`,
	`{"type":"user","message":{"content":"message"}, "message" }`,
}

// twoPass is the line as Decode read it before decodeLine: the line,
// then its message alone.
func twoPass(raw []byte) (line, message, error, error) {
	var l line
	if err := json.Unmarshal(raw, &l); err != nil {
		return line{}, message{}, err, nil
	}
	var msg message
	err := json.Unmarshal(l.Message, &msg)
	return l, msg, nil, err
}

// sameLine holds decodeLine to twoPass.
func sameLine(t *testing.T, raw []byte) {
	want, wantMsg, wantErr, wantMsgErr := twoPass(raw)
	var got line
	err := decodeLine(raw, &got)
	if (err == nil) != (wantErr == nil) {
		t.Fatalf("%q: decodeLine %v, two passes %v", raw, err, wantErr)
	}
	if err != nil {
		return
	}
	gotMsg, gotMsgErr := got.message()
	if (gotMsgErr == nil) != (wantMsgErr == nil) {
		t.Fatalf("%q: message %v, two passes %v", raw, gotMsgErr, wantMsgErr)
	}
	if gotMsgErr == nil && !reflect.DeepEqual(gotMsg, wantMsg) {
		t.Fatalf("%q: message\n got %+v\nwant %+v", raw, gotMsg, wantMsg)
	}
	got.Message, want.Message, got.msg = nil, nil, nil
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%q: line\n got %+v\nwant %+v", raw, got, want)
	}
}

func TestDecodeLine(t *testing.T) {
	for _, s := range lineSeeds {
		sameLine(t, []byte(s))
	}
	// The common line takes the one pass.
	var l line
	if err := decodeLine([]byte(lineSeeds[0]), &l); err != nil || l.msg == nil {
		t.Fatalf("message not decoded with the line: %v", err)
	}
	// So does an assistant line, whose message has "type":"message" (a
	// value, not a key).
	l = line{}
	if err := decodeLine([]byte(`{"type":"assistant","uuid":"u2","message":{"id":"m","type":"message","role":"assistant","content":[]}}`), &l); err != nil || l.msg == nil {
		t.Fatalf("assistant message not decoded with the line: %v", err)
	}
}

// FuzzDecodeLine holds the one-pass decode of a line and its message to
// decoding the line, then the message.
func FuzzDecodeLine(f *testing.F) {
	for _, s := range lineSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) { sameLine(t, raw) })
}

// BenchmarkDecodeLine decodes a tool result line of `bench import`'s
// shape (1.5 KB of output) in one pass and in two.
func BenchmarkDecodeLine(b *testing.B) {
	raw, _ := json.Marshal(map[string]any{"parentUuid": "p", "isSidechain": false, "userType": "external", "cwd": "/bench",
		"sessionId": "s", "version": "2.1.3", "gitBranch": "main", "type": "user", "uuid": "u", "timestamp": "2026-11-30T10:00:00.000Z",
		"message": map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": "toolu_1",
			"content": strings.Repeat("result line of a typical tool output\n", 40)}}}})
	b.Run("OnePass", func(b *testing.B) {
		b.SetBytes(int64(len(raw)))
		for b.Loop() {
			var l line
			if err := decodeLine(raw, &l); err != nil || l.msg == nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("TwoPasses", func(b *testing.B) {
		b.SetBytes(int64(len(raw)))
		for b.Loop() {
			if _, _, err, _ := twoPass(raw); err != nil {
				b.Fatal(err)
			}
		}
	})
}
