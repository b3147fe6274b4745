// Package usage reads the token counts of a message/assistant event's
// usage object, whose shape the contract leaves to the agent (DESIGN.md
// section 3). It accepts the spellings agents write: camelCase
// (inputTokens), snake_case (input_tokens, Anthropic's and OpenAI's), and
// OpenAI's prompt_tokens/completion_tokens.
package usage

import "encoding/json"

// Counts are the token counts of one attempt; zero where the usage object
// does not say.
type Counts struct {
	InputTokens         int64
	OutputTokens        int64
	CacheReadTokens     int64
	CacheCreationTokens int64
	// ContextWindow is the model's context size, when the agent records it.
	ContextWindow int64
}

// spellings of each count, first match wins.
var spellings = map[string][]string{
	"input":         {"inputTokens", "input_tokens", "prompt_tokens", "promptTokens"},
	"output":        {"outputTokens", "output_tokens", "completion_tokens", "completionTokens"},
	"cacheRead":     {"cacheReadInputTokens", "cache_read_input_tokens", "cacheReadTokens", "cached_input_tokens"},
	"cacheCreation": {"cacheCreationInputTokens", "cache_creation_input_tokens", "cacheCreationTokens"},
	"window":        {"contextWindow", "context_window", "modelContextWindow", "model_context_window"},
}

// Read decodes raw; ok is false when raw is absent or not a JSON object.
func Read(raw json.RawMessage) (c Counts, ok bool) {
	if len(raw) == 0 {
		return c, false
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil || m == nil {
		return c, false
	}
	get := func(kind string) int64 {
		for _, k := range spellings[kind] {
			var n float64
			if v, ok := m[k]; ok && json.Unmarshal(v, &n) == nil && n > 0 {
				return int64(n)
			}
		}
		return 0
	}
	c = Counts{
		InputTokens:         get("input"),
		OutputTokens:        get("output"),
		CacheReadTokens:     get("cacheRead"),
		CacheCreationTokens: get("cacheCreation"),
		ContextWindow:       get("window"),
	}
	return c, true
}

// Context is the tokens the attempt's request and reply take in the
// model's context: everything it read (cached or not) and wrote.
func (c Counts) Context() int64 {
	return c.InputTokens + c.CacheReadTokens + c.CacheCreationTokens + c.OutputTokens
}
