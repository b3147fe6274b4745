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

// fastSeeds are lines fastLine may or may not read, beside lineSeeds:
// keys in other cases, fields twice, values of other types, escapes.
var fastSeeds = []string{
	`{"type":"user","Type":"x","message":{"content":"a"}}`,
	`{"type":"user","uuid":"a","uuid":"b","message":{"content":"a"}}`,
	`{"type":"user","message":{"content":"a","Content":"b"}}`,
	`{"type":"user","message":{"content":"a","content":"b"}}`,
	`{"type":"user","isMeta":null,"isSidechain":"x","message":{"content":"a"}}`,
	`{"type":"user","isMeta":null,"isSidechain":true,"isCompactSummary":false,"message":{"content":"a"}}`,
	`{"type":"user","cwd":null,"parentUuid":"p","logicalParentUuid":"q","message":{"content":"a","stop_reason":null,"usage":null}}`,
	`{"type":"us\u0065r","summary":"a\nb\t\"c\" \\ \/ \b\f\r","message":{"id":"\ud800","content":"a"}}`,
	`{"type":"user","uuid":1,"message":{"content":"a"}}`,
	`{"type":"user","message":{"content":"a"},"x":[1,-2.5e+3,0,true,false,null,{"y":{}},[]]}`,
	`{"type":"user","message":{"content":"a"},"x":01}`, `{"type":"user","message":{"content":"a"},"x":-}`,
	`{"type":"user","message":{"content":"a"},"x":1.}`, `{"type":"user","message":{"content":"a"},"x":1e}`,
	`{"type":"user","message":{"content":"a"},"x":tru}`, `{"type":"user","message":{"content":"a"},"x":"\x"}`,
	"{\"type\":\"user\",\"message\":{\"content\":\"a\"},\"x\":\"\x01\"}", "{\"type\":\"user\",\"cwd\":\"\xff\",\"message\":{}}",
	"{\"type\":\"user\",\"cwd\":\"caf\u00e9\",\"message\":{}}", "{\"type\":\"user\",\"caf\u00e9\":1,\"message\":{}}",
	` { "type" : "user" , "message" : { "content" : [ 1 ] } } `, `{"type":"user","message":{}}x`, `{"type":"user","message":{}`,
	`{"type":"user","message":{"content":"a"},"x":"\u12"}`, `{"type":"user","message":{"content":"a"},"x":` + strings.Repeat("[", 9100) + strings.Repeat("]", 9100) + `}`,
	`{"type":"user","message":{"content":"a"}}` + "\n",
	`{"type":"summary","summary":"t","leafUuid":"u"}`, `{"type":"user","message":null}`,
}

// TestFastLine: what fastLine reads, it reads as encoding/json does
// (sameLine), and it reads the lines agents write.
func TestFastLine(t *testing.T) {
	for _, s := range append(fastSeeds, lineSeeds...) {
		sameLine(t, []byte(s))
	}
	for _, s := range []string{lineSeeds[0], lineSeeds[1], fastSeeds[5], fastSeeds[6], fastSeeds[7], fastSeeds[9], fastSeeds[20], fastSeeds[26]} {
		var l line
		if !fastLine([]byte(s), &l) {
			t.Errorf("fastLine does not read %s", s)
		}
	}
	for _, s := range []string{fastSeeds[0], fastSeeds[1], fastSeeds[3], fastSeeds[4], fastSeeds[8], fastSeeds[10], fastSeeds[17], fastSeeds[19], fastSeeds[27]} {
		var l line
		if fastLine([]byte(s), &l) {
			t.Errorf("fastLine reads %s", s)
		}
	}
}

// blockSeeds are contents fastBlocks may or may not read.
var blockSeeds = []string{
	`[{"type":"tool_use","id":"toolu_1","name":"Bash","input":{"command":"go test ./..."}}]`,
	`[{"type":"text","text":"a\nb"},{"type":"tool_use","id":"x","name":"n","input":null,"cache_control":{"type":"ephemeral"}}]`,
	`[{"type":"text","TEXT":"a"}]`, `[{"type":"text","text":"a","text":"b"}]`, `[{"type":"text","is_error":1}]`,
	`[{"type":"tool_result","content":[{"type":"text","text":"x"}],"is_error":true}]`, ` [ ] `, `[]x`, `[1]`, `[null]`, `null`,
	`"text"`, `[{"type":"text"},]`, `[{"type":"text"}`, "[{\"text\":\"\xff\"}]", `[{"text":"\u00e9"}]`,
}

// TestFastBlocks: what fastBlocks reads, it reads as encoding/json does.
func TestFastBlocks(t *testing.T) {
	for _, s := range append(blockSeeds, contentSeeds...) {
		sameBlocks(t, []byte(s))
	}
	for _, s := range []string{blockSeeds[0], blockSeeds[1], blockSeeds[5], blockSeeds[6], contentSeeds[0]} {
		if _, _, ok := fastBlocks([]byte(s)); !ok {
			t.Errorf("fastBlocks does not read %s", s)
		}
	}
}

func FuzzFastBlocks(f *testing.F) {
	for _, s := range append(blockSeeds, contentSeeds...) {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, content []byte) { sameBlocks(t, content) })
}

func sameBlocks(t *testing.T, content []byte) {
	blocks, raws, ok := fastBlocks(content)
	if !ok {
		return
	}
	var want []block
	var wantRaws []json.RawMessage
	if err := json.Unmarshal(content, &want); err != nil {
		t.Fatalf("%q: fastBlocks read it, encoding/json: %v", content, err)
	}
	if err := json.Unmarshal(content, &wantRaws); err != nil {
		t.Fatalf("%q: fastBlocks read it, encoding/json as raw blocks: %v", content, err)
	}
	if !reflect.DeepEqual(blocks, want) || !reflect.DeepEqual(raws, wantRaws) {
		t.Fatalf("%q:\n got %+v %q\nwant %+v %q", content, blocks, raws, want, wantRaws)
	}
}
