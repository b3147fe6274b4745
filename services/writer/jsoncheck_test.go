package writer

import (
	"strings"
	"testing"

	"github.com/sessionlog/sessionlog/pkg/schema"
)

var jsonSeeds = []string{
	`{}`, `[]`, `""`, `0`, `-0.5e+10`, `1E3`, `true`, `null`, ` {"a":1} `,
	`{"a":1,"a":2}`, `{"a":1,"b":{"a":2}}`, `{"a\u0062":1,"ab":2}`, `{"\ud800":1,"\udbff":2}`,
	`{"a":[1,2,{"b":null}],"c":"x\"y\\z\n"}`, `{"a":1}x`, `{"a":1} {}`, ``, `   `, `{`, `[1,]`, `{"a":}`,
	`01`, `1.`, `.5`, `-`, `+1`, `1e`, `"\x"`, "\"a\x01\"", `"\u12"`, `tru`, `nul`, `[`, `{"a" 1}`, `{1:2}`,
	"\"\xff\"", strings.Repeat("[", 64) + strings.Repeat("]", 64), strings.Repeat("[", 65) + strings.Repeat("]", 65),
	`{"sessionId":"s1","events":[{"type":"message/user","data":{"content":"hi"}}]}`,
	`{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"i":9,"j":10,"k":11,"l":12,"m":13,"n":14,"o":15,"p":16,"q":17,"a":18}`,
}

func sameVerdict(t *testing.T, b []byte) {
	got, want := checkJSON(b, schema.MaxJSONDepth), schema.CheckJSON(b, schema.MaxJSONDepth)
	if (got == nil) != (want == nil) {
		t.Fatalf("%q: checkJSON = %v, schema.CheckJSON = %v", b, got, want)
	}
}

func TestCheckJSONMatchesSchema(t *testing.T) {
	for _, s := range jsonSeeds {
		sameVerdict(t, []byte(s))
	}
}

// FuzzCheckJSON holds the writer's fast checker to schema.CheckJSON.
func FuzzCheckJSON(f *testing.F) {
	for _, s := range jsonSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) { sameVerdict(t, b) })
}
