package usage

import (
	"encoding/json"
	"testing"
)

func TestRead(t *testing.T) {
	for _, c := range []struct {
		name string
		raw  string
		want Counts
		ok   bool
	}{
		{"Anthropic", `{"input_tokens":10,"output_tokens":2,"cache_read_input_tokens":5,"cache_creation_input_tokens":1}`, Counts{10, 2, 5, 1, 0}, true},
		{"Camel", `{"inputTokens":3,"outputTokens":4,"contextWindow":200000}`, Counts{3, 4, 0, 0, 200000}, true},
		{"OpenAI", `{"prompt_tokens":7,"completion_tokens":8}`, Counts{7, 8, 0, 0, 0}, true},
		{"NotAnObject", `[1,2]`, Counts{}, false},
		{"Absent", ``, Counts{}, false},
		{"WrongTypes", `{"input_tokens":"many","output_tokens":-3}`, Counts{}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, ok := Read(json.RawMessage(c.raw))
			if got != c.want || ok != c.ok {
				t.Errorf("Read(%s) = %+v, %v; want %+v, %v", c.raw, got, ok, c.want, c.ok)
			}
		})
	}
	if n := (Counts{InputTokens: 10, OutputTokens: 2, CacheReadTokens: 5, CacheCreationTokens: 1}).Context(); n != 18 {
		t.Errorf("Context %d, want 18", n)
	}
}
