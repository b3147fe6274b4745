package logstore

import (
	"fmt"
	"hash/fnv"
	"strconv"
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
	// Partition is the session's partition, 0 when there is one.
	Partition int
}

// MaxPartitions bounds --partitions: every partition is a stream (a Raft
// group on a cluster) that every process reads, and whose JetStream API
// subjects the service user's permissions list (deploy/nats/perms.go).
const MaxPartitions = 16

// Layout is how sessions spread over streams (DESIGN.md section 11): one
// stream SESSIONS with subjects sessions.ev.<id> when there is one
// partition, else streams SESSIONS-<p> with subjects sessions.<p>.ev.<id>,
// p = FNV-1a 32 of the id's bytes modulo the partition count. A Store's
// layout is the one recorded in the store (see Open).
type Layout struct{ partitions int }

// NewLayout is the layout of p partitions (1 to MaxPartitions).
func NewLayout(p int) (Layout, error) {
	if p < 1 || p > MaxPartitions {
		return Layout{}, fmt.Errorf("logstore: partitions %d out of range 1..%d", p, MaxPartitions)
	}
	return Layout{partitions: p}, nil
}

// Partitions is the number of partitions (at least 1).
func (l Layout) Partitions() int { return max(l.partitions, 1) }

// Partition is the partition of a valid session id.
func (l Layout) Partition(sessionID string) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(sessionID))
	return int(h.Sum32() % uint32(l.Partitions()))
}

// Locate is the only place that maps a session id to a stream and subject.
func (l Layout) Locate(sessionID string) (Location, error) {
	if err := ValidateSessionID(sessionID); err != nil {
		return Location{}, err
	}
	if l.Partitions() == 1 {
		return Location{Stream: StreamName, Subject: SubjectPrefix + sessionID}, nil
	}
	p := l.Partition(sessionID)
	return Location{Stream: partitionStream(p), Subject: partitionPrefix(p) + sessionID, Partition: p}, nil
}

// Streams lists every stream that holds sessions, in partition order;
// consumers read them all.
func (l Layout) Streams() []string {
	if l.Partitions() == 1 {
		return []string{StreamName}
	}
	out := make([]string, l.Partitions())
	for p := range out {
		out[p] = partitionStream(p)
	}
	return out
}

// streamSubjects is the subject filter of a layout's stream.
func (l Layout) streamSubjects(stream string) []string {
	if l.Partitions() == 1 {
		return []string{SubjectPrefix + "*"}
	}
	p, _ := strconv.Atoi(strings.TrimPrefix(stream, StreamName+"-"))
	return []string{partitionPrefix(p) + "*"}
}

func partitionStream(p int) string { return StreamName + "-" + strconv.Itoa(p) }

// partitionPrefix is "sessions.<p>.ev.".
func partitionPrefix(p int) string {
	return strings.TrimSuffix(SubjectPrefix, "ev.") + strconv.Itoa(p) + ".ev."
}

// Locate maps a session id with the single-partition layout (P = 1). A
// running process uses its Store's Locate, which knows the recorded count.
func Locate(sessionID string) (Location, error) { return Layout{}.Locate(sessionID) }

// Streams is the single-partition layout's streams (P = 1); a running
// process uses its Store's Streams.
func Streams() []string { return Layout{}.Streams() }

// ValidateSessionID refuses, with bad_request, an id that cannot be a
// session's (it never reaches a subject).
func ValidateSessionID(sessionID string) error {
	if !schema.ValidSessionID(sessionID) {
		return schema.Errorf(schema.CodeBadRequest, "session id %q must match ^[A-Za-z0-9_-]{1,128}$", schema.Clip(sessionID, 40))
	}
	return nil
}

// LiveSubject is the core NATS subject for a session's transient events
// (one subject space whatever the partitions).
func LiveSubject(sessionID string) (string, error) {
	if err := ValidateSessionID(sessionID); err != nil {
		return "", err
	}
	return LivePrefix + sessionID, nil
}

// SessionFromSubject returns the session id of an event subject, of either
// layout: sessions.ev.<id> or sessions.<p>.ev.<id>.
func SessionFromSubject(subject string) (string, bool) {
	id, ok := strings.CutPrefix(subject, SubjectPrefix)
	if !ok {
		rest, found := strings.CutPrefix(subject, strings.TrimSuffix(SubjectPrefix, "ev."))
		if !found {
			return "", false
		}
		p, after, cut := strings.Cut(rest, ".ev.")
		if !cut || p == "" || strings.Trim(p, "0123456789") != "" {
			return "", false
		}
		id, ok = after, true
	}
	return id, ok && schema.ValidSessionID(id)
}

// MsgID is the idempotency key of an event.
func MsgID(sessionID, eventID string) string { return sessionID + ":" + eventID }
