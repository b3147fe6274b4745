package sessiontest

import (
	"testing"

	"github.com/sessionlog/sessionlog/pkg/schema"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct{ name, line, want string }{
		{"ShortForm", `tool/result turn=t1 call=c1 status=not_started synthetic seq=3 id=e3 session=s`,
			`{"schemaVersion":1,"sessionId":"s","seq":3,"eventId":"e3","time":"0001-01-01T00:00:00Z","type":"tool/result","turnId":"t1","toolCallId":"c1","ignorable":false,"synthetic":true,"data":{"status":"not_started"}}`},
		{"Defaults", `message/user turn=t1`,
			`{"schemaVersion":1,"sessionId":"","seq":0,"eventId":"","time":"0001-01-01T00:00:00Z","type":"message/user","turnId":"t1","ignorable":false,"synthetic":false,"data":{"content":"hi"}}`},
		{"StringData", `session/paused reason=waiting ignorable`,
			`{"schemaVersion":1,"sessionId":"","seq":0,"eventId":"","time":"0001-01-01T00:00:00Z","type":"session/paused","ignorable":true,"synthetic":false,"data":{"reason":"waiting"}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := Event(t, tc.line)
			got, err := schema.Encode(e)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Fatalf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
	for _, line := range []string{``, `turn/started turn`, `turn/started seq=x`, `{"type":1}`} {
		if _, err := Parse(line); err == nil {
			t.Errorf("Parse(%q) = ok, want an error", line)
		}
	}
}
