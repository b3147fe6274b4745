package agentlog

import "encoding/json"

// Tokens is a message's token usage in any agent's shape, so an export
// writes its own format's: Input counts the input tokens not read from a
// cache, CacheRead those read from one, CacheWrite those written to one.
type Tokens struct {
	Input, Output, CacheRead, CacheWrite int64
}

// UsageTokens reads usage as Claude Code (input_tokens,
// cache_read_input_tokens, ...), codex (input_tokens counting
// cached_input_tokens) or pi (input, cacheRead, ...) writes it; ok is
// false when it is none of them.
func UsageTokens(usage json.RawMessage) (t Tokens, ok bool) {
	var u struct {
		// Claude Code and codex
		InputTokens   *int64 `json:"input_tokens"`
		OutputTokens  int64  `json:"output_tokens"`
		CacheRead     int64  `json:"cache_read_input_tokens"`
		CacheCreation int64  `json:"cache_creation_input_tokens"`
		CachedInput   *int64 `json:"cached_input_tokens"`
		// pi
		PiInput      *int64 `json:"input"`
		PiOutput     int64  `json:"output"`
		PiCacheRead  int64  `json:"cacheRead"`
		PiCacheWrite int64  `json:"cacheWrite"`
	}
	if len(usage) == 0 || json.Unmarshal(usage, &u) != nil {
		return Tokens{}, false
	}
	switch {
	case u.PiInput != nil:
		return Tokens{Input: *u.PiInput, Output: u.PiOutput, CacheRead: u.PiCacheRead, CacheWrite: u.PiCacheWrite}, true
	case u.CachedInput != nil && u.InputTokens != nil:
		return Tokens{Input: max(*u.InputTokens-*u.CachedInput, 0), Output: u.OutputTokens, CacheRead: *u.CachedInput}, true
	case u.InputTokens != nil:
		return Tokens{Input: *u.InputTokens, Output: u.OutputTokens, CacheRead: u.CacheRead, CacheWrite: u.CacheCreation}, true
	}
	return Tokens{}, false
}
