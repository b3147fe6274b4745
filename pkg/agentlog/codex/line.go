package codex

import (
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
)

// Line kinds: RolloutLine {timestamp, type, payload}, with type one of the
// RolloutItem variants (codex-rs/protocol, serde tag "type", content "payload").
const (
	kindSessionMeta  = "session_meta"
	kindResponseItem = "response_item"
	kindEventMsg     = "event_msg"
	kindTurnContext  = "turn_context"
	kindCompacted    = "compacted"
)

// rolloutLine is one line of a rollout file.
type rolloutLine struct {
	Timestamp string          `json:"timestamp"`
	Type      string          `json:"type"`
	Payload   json.RawMessage `json:"payload"`
}

// sessionMeta is the payload of the first line (SessionMetaLine: SessionMeta
// flattened, plus git).
type sessionMeta struct {
	ID            string          `json:"id"`
	ForkedFromID  string          `json:"forked_from_id,omitempty"`
	Timestamp     string          `json:"timestamp"`
	Cwd           string          `json:"cwd"`
	Originator    string          `json:"originator"`
	CLIVersion    string          `json:"cli_version"`
	Source        json.RawMessage `json:"source,omitempty"`
	ModelProvider string          `json:"model_provider,omitempty"`
	Git           *gitInfo        `json:"git,omitempty"`
}

type gitInfo struct {
	CommitHash    string `json:"commit_hash,omitempty"`
	Branch        string `json:"branch,omitempty"`
	RepositoryURL string `json:"repository_url,omitempty"`
}

// responseItem is the union of the ResponseItem variants this mapping reads
// (models.rs, serde tag "type").
type responseItem struct {
	Type string `json:"type"`
	// message
	Role    string          `json:"role,omitempty"`
	Content json.RawMessage `json:"content,omitempty"`
	Phase   string          `json:"phase,omitempty"`
	// function_call, custom_tool_call, local_shell_call
	Name      string          `json:"name,omitempty"`
	Arguments string          `json:"arguments,omitempty"`
	Input     string          `json:"input,omitempty"`
	Action    json.RawMessage `json:"action,omitempty"`
	Status    string          `json:"status,omitempty"`
	CallID    string          `json:"call_id,omitempty"`
	// function_call_output, custom_tool_call_output: a string or a list of
	// content items.
	Output json.RawMessage `json:"output,omitempty"`
}

// contentItem is a ContentItem of a message (input_text, output_text,
// input_image) or a FunctionCallOutputContentItem.
type contentItem struct {
	Type     string `json:"type"`
	Text     string `json:"text,omitempty"`
	ImageURL string `json:"image_url,omitempty"`
}

// eventMsg is the union of the EventMsg variants this mapping reads.
type eventMsg struct {
	Type   string `json:"type"`
	TurnID string `json:"turn_id,omitempty"`
	Reason string `json:"reason,omitempty"`
	// token_count
	Info *struct {
		LastTokenUsage json.RawMessage `json:"last_token_usage"`
	} `json:"info,omitempty"`
}

type turnContext struct {
	TurnID string `json:"turn_id,omitempty"`
	Model  string `json:"model,omitempty"`
}

type compactedItem struct {
	Message            string            `json:"message"`
	ReplacementHistory []json.RawMessage `json:"replacement_history,omitempty"`
}

// messageText joins the text items of a message's content.
func messageText(content json.RawMessage) string {
	var items []contentItem
	if json.Unmarshal(content, &items) != nil {
		return ""
	}
	var b strings.Builder
	for _, it := range items {
		if it.Text == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteString("\n")
		}
		b.WriteString(it.Text)
	}
	return b.String()
}

// injected reports whether a user-role message is context the harness adds
// (AGENTS.md, environment, instructions) rather than something the user
// typed: codex marks those by the tags it wraps them in.
func injected(text string) bool {
	t := strings.TrimLeft(text, " \n")
	for _, p := range []string{"<environment_context>", "<user_instructions>", "# AGENTS.md instructions for ", "<permissions instructions>", "<user_shell_command>", "<turn_aborted>", "<skill>"} {
		if strings.HasPrefix(t, p) {
			return true
		}
	}
	return false
}

// exitHeader is the first line codex puts on shell output it formats as text.
var exitHeader = regexp.MustCompile(`^Exit code: (-?\d+)\n`)

// execOutput is the structured shell output codex writes as a JSON string.
type execOutput struct {
	Output   *string `json:"output"`
	Metadata *struct {
		ExitCode *int `json:"exit_code"`
	} `json:"metadata"`
}

// toolOutput reads a function_call_output's output: the text the model saw
// and whether the tool reported failure. A string output that is codex's
// structured shell output ({"output","metadata":{"exit_code"}}) is read as
// its output text and exit code; a text output with an "Exit code: N"
// header as itself with that exit code; anything else (content items, plain
// text) as ok.
func toolOutput(raw json.RawMessage) (output json.RawMessage, failed bool) {
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return raw, false
	}
	if t := strings.TrimSpace(s); strings.HasPrefix(t, "{") {
		var eo execOutput
		if json.Unmarshal([]byte(t), &eo) == nil && eo.Output != nil && eo.Metadata != nil && eo.Metadata.ExitCode != nil {
			b, _ := json.Marshal(*eo.Output)
			return b, *eo.Metadata.ExitCode != 0
		}
	}
	if m := exitHeader.FindStringSubmatch(s); m != nil {
		code, _ := strconv.Atoi(m[1])
		return raw, code != 0
	}
	return raw, false
}
