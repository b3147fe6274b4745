package schema

import "testing"

// FuzzDecodeValidate: Decode and Validate never panic, and whatever decodes
// and validates as a stored event encodes and decodes back to an equal
// envelope.
func FuzzDecodeValidate(f *testing.F) {
	for _, dir := range []string{"v0/*.json", "v1/*.json"} {
		for _, b := range readTestdata(f, dir) {
			f.Add(b)
		}
	}
	for _, s := range []string{
		``, `{}`, `null`, `[]`, `{"schemaVersion":2}`, `{"schemaVersion":-1}`,
		`{"schemaVersion":1,"sessionId":"s","seq":1,"eventId":"e","time":"2026-12-02T15:04:05Z","type":"session/created","data":null}`,
		`{"schemaVersion":1,"sessionId":"s","seq":2,"eventId":"e","time":"2026-12-02T15:04:05Z","type":"x/y","ignorable":true,"data":{"a":"<&>"}}`,
		`{"kind":"tool/result","payload":{"ok":true},"session_id":"s","seq":3,"event_id":"e","ts":"2026-12-02T15:04:05Z","turn_id":"t","tool_call_id":"c"}`,
		`{"kind":"tool/result","payload":null}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := Decode(b)
		if err != nil {
			return
		}
		_ = Validate(&e, ValidateOptions{})
		if Validate(&e, ValidateOptions{Stored: true, Origin: OriginService}) != nil {
			return
		}
		checkRoundTrip(t, e)
	})
}
