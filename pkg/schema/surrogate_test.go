package schema

import "testing"

// A lone surrogate escape is valid JSON syntax that readers decode
// differently (encoding/json: U+FFFD): refused, pairs accepted.
func TestCheckJSONSurrogates(t *testing.T) {
	for _, tc := range []struct {
		doc string
		ok  bool
	}{
		{`"\ud83d\ude00"`, true},
		{`"\u00e9\\ud800"`, true}, // an escaped backslash, then text
		{`"\ud800"`, false},
		{`"\udc00"`, false},
		{`"\ud800x"`, false},
		{`"\ud800\u0041"`, false},
		{`{"a":"\uDBFF\uDFFF"}`, true},
		{`{"\ud800":1}`, false},
	} {
		if err := CheckJSON([]byte(tc.doc), MaxJSONDepth); (err == nil) != tc.ok {
			t.Errorf("CheckJSON(%s) = %v, want ok=%v", tc.doc, err, tc.ok)
		}
	}
}
