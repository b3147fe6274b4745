package pi

import (
	"encoding/json"
	"strconv"
	"strings"
)

// Entry types of a pi session file (session-manager.ts, version 3).
const (
	typeSession       = "session"
	typeMessage       = "message"
	typeCompaction    = "compaction"
	typeBranchSummary = "branch_summary"
	typeCustomMessage = "custom_message"
)

// Message roles (AgentMessage: pi-ai's user/assistant/toolResult plus the
// coding agent's own).
const (
	roleUser          = "user"
	roleAssistant     = "assistant"
	roleToolResult    = "toolResult"
	roleBashExecution = "bashExecution"
	roleCustom        = "custom"
)

// header is the first line: SessionHeader.
type header struct {
	Type          string `json:"type"`
	Version       int    `json:"version,omitempty"`
	ID            string `json:"id"`
	Timestamp     string `json:"timestamp"`
	Cwd           string `json:"cwd"`
	ParentSession string `json:"parentSession,omitempty"`
}

// entry is the union of the SessionEntry variants this mapping reads.
// ParentID is a pointer: the first entry has "parentId": null.
type entry struct {
	Type      string  `json:"type"`
	ID        string  `json:"id"`
	ParentID  *string `json:"parentId"`
	Timestamp string  `json:"timestamp"`
	// message
	Message *message `json:"message,omitempty"`
	// compaction, branch_summary
	Summary          string `json:"summary,omitempty"`
	FirstKeptEntryID string `json:"firstKeptEntryId,omitempty"`
	// version 1: the index of the first kept line (migrate.go)
	FirstKeptEntryIndex *int   `json:"firstKeptEntryIndex,omitempty"`
	TokensBefore        *int   `json:"tokensBefore,omitempty"`
	FromID              string `json:"fromId,omitempty"`
	// custom_message
	CustomType string          `json:"customType,omitempty"`
	Content    json.RawMessage `json:"content,omitempty"`
	Display    *bool           `json:"display,omitempty"`
	// session_info
	Name string `json:"name,omitempty"`
	// model_change
	Provider string `json:"provider,omitempty"`
	ModelID  string `json:"modelId,omitempty"`
}

func (e *entry) parent() string {
	if e.ParentID == nil {
		return ""
	}
	return *e.ParentID
}

// message is an AgentMessage.
type message struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content,omitempty"`
	// assistant
	API          string          `json:"api,omitempty"`
	Provider     string          `json:"provider,omitempty"`
	Model        string          `json:"model,omitempty"`
	Usage        json.RawMessage `json:"usage,omitempty"`
	StopReason   string          `json:"stopReason,omitempty"`
	ErrorMessage string          `json:"errorMessage,omitempty"`
	// toolResult
	ToolCallID string          `json:"toolCallId,omitempty"`
	ToolName   string          `json:"toolName,omitempty"`
	Details    json.RawMessage `json:"details,omitempty"`
	IsError    bool            `json:"isError,omitempty"`
	// bashExecution
	Command            string `json:"command,omitempty"`
	Output             string `json:"output,omitempty"`
	ExitCode           *int   `json:"exitCode,omitempty"`
	Cancelled          bool   `json:"cancelled,omitempty"`
	Truncated          bool   `json:"truncated,omitempty"`
	FullOutputPath     string `json:"fullOutputPath,omitempty"`
	ExcludeFromContext bool   `json:"excludeFromContext,omitempty"`
	Timestamp          int64  `json:"timestamp,omitempty"`
}

// block is a content block: text, thinking, image or toolCall.
type block struct {
	Type      string          `json:"type"`
	Text      string          `json:"text,omitempty"`
	Thinking  string          `json:"thinking,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	Data      string          `json:"data,omitempty"`
	MimeType  string          `json:"mimeType,omitempty"`
}

// blocks reads content that is a string or a list of blocks.
func blocks(content json.RawMessage) []block {
	var s string
	if json.Unmarshal(content, &s) == nil {
		return []block{{Type: "text", Text: s}}
	}
	var bs []block
	_ = json.Unmarshal(content, &bs)
	return bs
}

// The texts pi's convertToLlm (messages.ts) gives the model for its own
// message kinds.
const (
	branchSummaryPrefix = "The following is a summary of a branch that this conversation came back from:\n\n<summary>\n"
	branchSummarySuffix = "</summary>"
)

// bashExecutionText is bashExecutionToText of messages.ts.
func bashExecutionText(m *message) string {
	var b strings.Builder
	b.WriteString("Ran `" + m.Command + "`\n")
	if m.Output != "" {
		b.WriteString("```\n" + m.Output + "\n```")
	} else {
		b.WriteString("(no output)")
	}
	if m.Cancelled {
		b.WriteString("\n\n(command cancelled)")
	} else if m.ExitCode != nil && *m.ExitCode != 0 {
		b.WriteString("\n\nCommand exited with code " + strconv.Itoa(*m.ExitCode))
	}
	if m.Truncated && m.FullOutputPath != "" {
		b.WriteString("\n\n[Output truncated. Full output: " + m.FullOutputPath + "]")
	}
	return b.String()
}
