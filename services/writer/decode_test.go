package writer

import (
	"reflect"
	"strings"
	"testing"

	"github.com/sessionlog/sessionlog/pkg/schema"
)

var decodeSeeds = []string{
	`{"sessionId":"s1","expectedSeq":3,"holder":"h","events":[{"type":"message/user","data":{"content":"hi"}}]}`,
	`{"sessionId":"s1","holder":"h","takeover":true,"events":[]}`, `{"sessionId":"s1","takeover":null}`, `{"sessionId":"s1","takeover":1}`,
	`{"sessionId":"s1","events":[{"schemaVersion":1,"sessionId":"s1","seq":4,"eventId":"e1","time":"2026-12-02T15:04:05.123456Z","type":"tool/started","turnId":"t","stepId":"s","attemptId":"a","toolCallId":"c","ignorable":false,"synthetic":true,"data":null}]}`,
	`{"sessionId":null,"expectedSeq":null,"events":null}`,
	`{"sessionId":"s\u0031","events":[null,{}]}`,
	`{"session\u0049d":"s1","events":[]}`,
	`{"sessionId":"s1","sessionId":"s2","events":[]}`,
	`{"sessionId":"s1","events":[{"type":"a","type":"b"}]}`,
	`{"sessionId":"s1","SessionID":"s2"}`,
	`{"sessionId":"s1","events":[{"Type":"x"}]}`,
	`{"sessionId":"s1","bogus":1}`,
	`{"sessionId":"s1","expectedSeq":-1}`, `{"sessionId":"s1","expectedSeq":1.5}`, `{"sessionId":"s1","expectedSeq":"1"}`,
	`{"sessionId":1}`, `{"sessionId":"s1","events":{}}`, `{"sessionId":"s1","events":[1]}`,
	`{"sessionId":"s1","events":[{"time":"yesterday"}]}`, `{"sessionId":"s1","events":[{"ignorable":1}]}`,
	`{"sessionId":"s1","events":[{"data":{"a":1,"a":2}}]}`, `{"sessionId":"s1"} x`, `[]`, `null`, ``, `{`,
	`{"sessionId":"s1","events":[{"data":` + strings.Repeat("[", 61) + strings.Repeat("]", 61) + `}]}`,
	`{"sessionId":"s1","events":[{"data":` + strings.Repeat("[", 60) + strings.Repeat("]", 60) + `}]}`,
	`{"sessionId":"s1","events":[{"schemaVersion":99999999999999999999}]}`,
}

// jsonSeeds are the seeds of schema.FuzzCheckJSON: documents the request
// decoder must check as schema.CheckJSON does.
var jsonSeeds = []string{
	`{}`, `[]`, `""`, `0`, `-0.5e+10`, `1E3`, `true`, `null`, ` {"a":1} `,
	`{"a":1,"a":2}`, `{"a":1,"b":{"a":2}}`, `{"a\u0062":1,"ab":2}`, `{"\ud800":1,"\udbff":2}`,
	`{"a":[1,2,{"b":null}],"c":"x\"y\\z\n"}`, `{"a":1}x`, `{"a":1} {}`, ``, `   `, `{`, `[1,]`, `{"a":}`,
	`01`, `1.`, `.5`, `-`, `+1`, `1e`, `"\x"`, "\"a\x01\"", `"\u12"`, `tru`, `nul`, `[`, `{"a" 1}`, `{1:2}`,
	"\"\xff\"", strings.Repeat("[", 64) + strings.Repeat("]", 64), strings.Repeat("[", 65) + strings.Repeat("]", 65),
	`{"sessionId":"s1","events":[{"type":"message/user","data":{"content":"hi"}}]}`,
	`{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"i":9,"j":10,"k":11,"l":12,"m":13,"n":14,"o":15,"p":16,"q":17,"a":18}`,
}

func sameDecode(t *testing.T, b []byte) {
	var mine, std AppendRequest
	errMine := decodeAppend(b, &mine)
	errStd := schema.Unmarshal(b, &std)
	switch {
	case errMine == nil && errStd != nil:
		t.Fatalf("%q: decodeAppend accepts, schema.Unmarshal: %v", b, errStd)
	case errMine == nil:
		if !reflect.DeepEqual(mine, std) {
			t.Fatalf("%q:\nmine %+v\nstd  %+v", b, mine, std)
		}
	case errStd == nil:
		// Stricter only on key spelling (exact names).
		if !strings.Contains(errMine.Error(), "unknown field") && !strings.Contains(errMine.Error(), "too many keys") {
			t.Fatalf("%q: decodeAppend: %v; schema.Unmarshal accepts", b, errMine)
		}
	}
}

func TestDecodeAppendMatchesEncodingJSON(t *testing.T) {
	for _, s := range append(decodeSeeds, jsonSeeds...) {
		sameDecode(t, []byte(s))
	}
}

// FuzzDecodeAppend holds the request decoder to schema.Unmarshal.
func FuzzDecodeAppend(f *testing.F) {
	for _, s := range decodeSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) { sameDecode(t, b) })
}
