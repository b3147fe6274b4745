package session

import (
	"encoding/json"

	"github.com/sessionlog/sessionlog/pkg/schema"
)

// itemIDs are the ids an event's data may name.
type itemIDs struct {
	ApprovalID   string `json:"approvalId"`
	CompactionID string `json:"compactionId"`
	JobID        string `json:"jobId"`
}

// dataIDs decodes the ids e's data names (what the tests match events
// by; the rules decode each event's data as its type's).
func dataIDs(e *schema.Envelope) itemIDs {
	var d itemIDs
	_ = json.Unmarshal(e.Data, &d)
	return d
}
