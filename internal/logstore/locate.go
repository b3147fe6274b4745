package logstore

import (
	"fmt"
	"strings"

	"github.com/sessionlog/sessionlog/pkg/api"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// Names of the contract (DESIGN.md section 2), defined in pkg/api.
const (
	StreamName       = api.StreamName
	SubjectPrefix    = api.EventSubjectPrefix
	LivePrefix       = api.LiveSubjectPrefix
	LeaseBucket      = api.LeaseBucket
	ClaimBucket      = api.ClaimBucket
	SubjectAppend    = api.SubjectAppend
	SubjectHeartbeat = api.SubjectHeartbeat
	SubjectFork      = api.SubjectFork
	SubjectRepair    = api.SubjectRepair
)

// Header names.
const (
	HeaderMsgID       = "Nats-Msg-Id"
	HeaderExpectedSeq = "Nats-Expected-Last-Subject-Sequence"
	HeaderType        = "SL-Type"
	HeaderSeq         = "SL-Seq"
	HeaderSchema      = "SL-Schema"
)

// Location says where a session's events live.
type Location struct {
	Stream  string
	Subject string
}

// Locate is the only place that maps a session id to a stream and subject.
func Locate(sessionID string) (Location, error) {
	if !schema.ValidSessionID(sessionID) {
		return Location{}, schema.Errorf(schema.CodeBadRequest, "session id %q must match ^[A-Za-z0-9_-]{1,128}$", clip(sessionID))
	}
	return Location{Stream: StreamName, Subject: SubjectPrefix + sessionID}, nil
}

// LiveSubject is the core NATS subject for a session's transient events.
func LiveSubject(sessionID string) (string, error) {
	if _, err := Locate(sessionID); err != nil {
		return "", err
	}
	return LivePrefix + sessionID, nil
}

// Streams lists every stream that holds sessions; consumers read them all.
func Streams() []string { return []string{StreamName} }

// SessionFromSubject returns the session id of an event subject.
func SessionFromSubject(subject string) (string, bool) {
	id, ok := strings.CutPrefix(subject, SubjectPrefix)
	return id, ok && schema.ValidSessionID(id)
}

// MsgID is the idempotency key of an event.
func MsgID(sessionID, eventID string) string { return sessionID + ":" + eventID }

func clip(s string) string {
	if len(s) > 40 {
		return fmt.Sprintf("%s...", s[:40])
	}
	return s
}
