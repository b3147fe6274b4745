// Package api is the wire contract of sessionlog as Go types (DESIGN.md
// sections 2, 4, 8, 12 and 14): the subjects and buckets, every request
// and reply of the sessions.api.* services, the error body and its codes.
// A reader finds every message an agent can send here. It imports no NATS,
// so a Go agent outside this module can speak the contract with any
// client.
package api

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	"github.com/sessionlog/sessionlog/pkg/schema"
)

// Streams, subjects and buckets (section 2).
const (
	// StreamName is the JetStream stream of session events.
	StreamName = "SESSIONS"
	// EventSubjectPrefix + <sessionId> is a session's event subject.
	EventSubjectPrefix = "sessions.ev."
	// LiveSubjectPrefix + <sessionId> carries transient events (core NATS).
	LiveSubjectPrefix = "sessions.live."

	SubjectAppend    = "sessions.api.append"
	SubjectHeartbeat = "sessions.api.heartbeat"
	SubjectFork      = "sessions.api.fork"
	SubjectRepair    = "sessions.api.repair"
	SubjectRead      = "sessions.api.read"
	SubjectErase     = "sessions.api.erase"
	// SubjectList lists the sessions the requester may read (section
	// 12), served by the projector from its views.
	SubjectList = "sessions.api.list"

	// The agent-file source endpoints (section 15): an agent's own
	// transcript entries in, mapped as `import --from FORMAT` maps a file.
	SubjectSourceAppend  = "sessions.api.source.append"
	SubjectSourceLoad    = "sessions.api.source.load"
	SubjectSourceList    = "sessions.api.source.list"
	SubjectSourceSubkeys = "sessions.api.source.subkeys"

	// LeaseBucket holds session leases: key = session id, value a Lease.
	LeaseBucket = "SESSION_LEASES"
	// ClaimBucket holds the repairer's claims on sessions.
	ClaimBucket = "SESSION_CLAIMS"
	// ForkBucket holds the forker's records of forks in progress.
	ForkBucket = "SESSION_FORKS"
	// SourceBucket indexes the transcripts written through the source
	// endpoints by project (section 15); only the writer reads and writes it.
	SourceBucket = "SESSION_SOURCES"

	// AuditStream keeps one record per erased session (section 14), on
	// AuditSubjectPrefix + <sessionId>.
	AuditStream        = "SESSION_AUDIT"
	AuditSubjectPrefix = "sessions.audit.erased."
)

// EventSubject is the subject of a session's events. It does not check
// the id: callers check it with schema.ValidSessionID first.
func EventSubject(sessionID string) string { return EventSubjectPrefix + sessionID }

// LiveSubject is the core NATS subject of a session's transient events.
func LiveSubject(sessionID string) string { return LiveSubjectPrefix + sessionID }

// LiveEvent is a transient event on sessions.live.<id>: never stored,
// ordered after the durable seq AfterSeq.
type LiveEvent struct {
	SessionID string          `json:"sessionId"`
	AfterSeq  uint64          `json:"afterSeq"`
	Data      json.RawMessage `json:"data"`
}

// AppendRequest is a request on sessions.api.append (section 4).
type AppendRequest struct {
	SessionID string `json:"sessionId"`
	// ExpectedSeq: nil = after whatever the tail is; 0 = the session must
	// not exist; n = its last seq must be n.
	ExpectedSeq *uint64           `json:"expectedSeq,omitempty"`
	Holder      string            `json:"holder,omitempty"`
	Events      []schema.Envelope `json:"events"`
	// Takeover takes the lease from another holder whose lease is live
	// (section 2); without it such an append is refused with conflict.
	Takeover bool `json:"takeover,omitempty"`
}

// AppendReply is the success reply of an append, sent once JetStream
// acknowledged every event. Duplicate: every event was already stored.
type AppendReply struct {
	SessionID string `json:"sessionId"`
	FirstSeq  uint64 `json:"firstSeq"`
	LastSeq   uint64 `json:"lastSeq"`
	StreamSeq uint64 `json:"streamSeq"`
	Duplicate bool   `json:"duplicate"`
	// Hash is the hash chain's link of the last event stored (SL-Prev of
	// the next, DESIGN.md section 2), when the writer knows it (not on a
	// duplicate): a client compares it with later answers.
	Hash string `json:"hash,omitempty"`
}

// HeartbeatRequest is a request on sessions.api.heartbeat: holder renews
// its lease of an existing session.
type HeartbeatRequest struct {
	SessionID string `json:"sessionId"`
	Holder    string `json:"holder"`
	// Takeover takes the lease from another holder whose lease is live.
	Takeover bool `json:"takeover,omitempty"`
}

// HeartbeatReply says how long the lease lasts from now.
type HeartbeatReply struct {
	SessionID string `json:"sessionId"`
	Holder    string `json:"holder"`
	TTLMs     int64  `json:"ttlMs"`
}

// Lease is the value of a SESSION_LEASES entry (stored sealed by a
// deployment that seals: DESIGN.md section 2).
type Lease struct {
	Holder    string `json:"holder"`
	RenewedAt string `json:"renewedAt"`
}

// ForkRequest is a request on sessions.api.fork (section 8).
type ForkRequest struct {
	ParentID string `json:"parentId"`
	// At is the cut; absent means the parent's last safe point.
	At        *ForkAt `json:"at,omitempty"`
	ChildID   string  `json:"childId,omitempty"`
	Workspace string  `json:"workspace,omitempty"`
}

// ForkAt names a cut: a seq, or a turn id (right after that turn ended).
type ForkAt struct {
	Seq    *uint64 `json:"seq,omitempty"`
	TurnID string  `json:"turnId,omitempty"`
}

// ForkReply is the success reply of a fork.
type ForkReply struct {
	ChildID    string `json:"childId"`
	ParentID   string `json:"parentId"`
	SeedLength uint64 `json:"seedLength"`
	Depth      int    `json:"depth"`
}

// RepairRequest is a request on sessions.api.repair (section 8). Without
// Force a session whose lease is live is refused with conflict.
type RepairRequest struct {
	SessionID string `json:"sessionId"`
	Force     bool   `json:"force,omitempty"`
}

// RepairReply is the success reply of a repair: the seqs it appended and
// what it closed.
type RepairReply struct {
	SessionID string          `json:"sessionId"`
	Repaired  bool            `json:"repaired"`
	FirstSeq  uint64          `json:"firstSeq,omitempty"`
	LastSeq   uint64          `json:"lastSeq,omitempty"`
	Closed    []schema.Closed `json:"closed"`
}

// Read limits (section 12).
const (
	// DefaultReadLimit is a read's page size when the request names none.
	DefaultReadLimit = 1000
	// MaxReadLimit bounds a read request's limit.
	MaxReadLimit = 1000
)

// ReadRequest is a request on sessions.api.read (section 12): the events
// after AfterSeq, oldest first, at most Limit (0 = DefaultReadLimit).
type ReadRequest struct {
	SessionID string `json:"sessionId"`
	AfterSeq  uint64 `json:"afterSeq,omitempty"`
	Limit     int    `json:"limit,omitempty"`
}

// ReadReply is one page of a session. Events are the stored envelopes as
// stored. LastSeq is the session's last seq when the read began (the page
// is consistent up to it); More says another page exists: ask again with
// AfterSeq set to the seq of the page's last event.
type ReadReply struct {
	SessionID string            `json:"sessionId"`
	Events    []json.RawMessage `json:"events"`
	LastSeq   uint64            `json:"lastSeq"`
	More      bool              `json:"more"`
}

// List limits (section 12).
const (
	// DefaultListLimit is a list's page size when the request names none.
	DefaultListLimit = 100
	// MaxListLimit bounds a list request's limit.
	MaxListLimit = 1000
)

// ListRequest is a request on sessions.api.list (section 12): the
// sessions the requester may read, most recently active first, at most
// Limit (0 = DefaultListLimit), after the cursor After (a Next of an
// earlier page; "" the first page).
type ListRequest struct {
	After string `json:"after,omitempty"`
	Limit int    `json:"limit,omitempty"`
}

// ListReply is one page of a list: each session named as the requester
// names it (an agent of a tenant by its <id>), and Next, the cursor of
// the following page ("" at the end).
type ListReply struct {
	Sessions []ListedSession `json:"sessions"`
	Next     string          `json:"next,omitempty"`
}

// ListedSession is a session as a list names it: its id, its status and
// last seq as the projector's views hold them.
type ListedSession struct {
	SessionID string `json:"sessionId"`
	Status    string `json:"status"`
	LastSeq   uint64 `json:"lastSeq"`
}

// EraseRequest is a request on sessions.api.erase (section 14; operators
// only). Cascade also erases every fork descendant.
type EraseRequest struct {
	SessionID string `json:"sessionId"`
	Reason    string `json:"reason"`
	By        string `json:"by"`
	Cascade   bool   `json:"cascade,omitempty"`
}

// EraseReply says where the erase stands. State is EraseDone once every
// job is done, else EraseAccepted (the jobs go on by themselves: ask
// again, with the same request, to follow them). Erased lists the
// sessions whose erase is done and Events how many events they held;
// Jobs has one entry per session, the request's first.
type EraseReply struct {
	SessionID string     `json:"sessionId"`
	Erased    []string   `json:"erased"`
	Events    uint64     `json:"events"`
	State     string     `json:"state,omitempty"`
	Jobs      []EraseJob `json:"jobs,omitempty"`
}

// The states of an EraseReply.
const (
	EraseAccepted = "accepted"
	EraseDone     = "done"
)

// EraseJob is one session's erase as its record says: Phase "deleting",
// "records", "audit" or "done"; Deleted of Total messages deleted (Total
// was the session's length when the erase was accepted, raised to Deleted
// when the job passes it; from phase "records" on, Deleted counts every
// message the job deleted, its audit's events and unhashed, and Total is
// as many: DESIGN.md section 14).
type EraseJob struct {
	SessionID string `json:"sessionId"`
	Phase     string `json:"phase"`
	Total     uint64 `json:"total"`
	Deleted   uint64 `json:"deleted"`
	Done      bool   `json:"done"`
}

// AuditRecord is the body of a SESSION_AUDIT message: no content, and the
// sha256 over the erased bodies in seq order. Owner and Grants are the
// session's owner and the agents it was granted to when its erase was
// accepted (Authorize's), ids only: a token of agents sees the record by
// them. A record written before they were kept has neither.
type AuditRecord struct {
	SessionID string `json:"sessionId"`
	LastSeq   uint64 `json:"lastSeq"`
	Events    uint64 `json:"events"`
	ErasedAt  string `json:"erasedAt"`
	By        string `json:"by"`
	Reason    string `json:"reason"`
	SHA256    string `json:"sha256"`
	// Unhashed: messages deleted without being hashed, sealed bodies that
	// do not open (whose key the erase had destroyed, or garbled) and
	// messages on the session's subject that are not events (DESIGN.md
	// section 14); absent when none.
	Unhashed uint64        `json:"unhashed,omitempty"`
	Owner    *schema.Owner `json:"owner,omitempty"`
	Grants   []string      `json:"grants,omitempty"`
}

// SourceKey names one agent transcript as the agent's own store keys it
// (the Claude Agent SDK's SessionKey): the project, the agent's session
// id, and for a subagent transcript its subpath ("subagents/agent-<id>").
// Format is the agent's format ("claude-code").
type SourceKey struct {
	Format     string `json:"format"`
	ProjectKey string `json:"projectKey"`
	SessionKey string `json:"sessionKey"`
	Subpath    string `json:"subpath,omitempty"`
}

// SourceAppendRequest is a request on sessions.api.source.append: the next
// entries of a transcript, each one JSON line of the agent's file. They are
// mapped exactly as `import --from FORMAT` maps the same file, after what
// is stored: an entry whose key (uuid) is stored adds nothing, and so
// does a replay of stored entries (DESIGN.md section 15).
type SourceAppendRequest struct {
	SourceKey
	Entries []json.RawMessage `json:"entries"`
}

// SourceAppendReply names the session the transcript maps to and how many
// events the request added.
type SourceAppendReply struct {
	SessionID string `json:"sessionId"`
	Appended  int    `json:"appended"`
	LastSeq   uint64 `json:"lastSeq"`
}

// SourceLoadRequest is a request on sessions.api.source.load: a page of
// the transcript's entries, from its start or from Cursor (the previous
// reply's Next).
type SourceLoadRequest struct {
	SourceKey
	Cursor string `json:"cursor,omitempty"`
}

// SourceLoadReply holds a page of the transcript's entries verbatim, from
// the session's source/line events; Found is false for a key never
// written (or erased). A page fits in one NATS message: Next, when set,
// is the Cursor of the next page. An entry too large for a page comes as
// Part pieces of its text, one page each, with no Entries beside them:
// the entry is their concatenation once a Part has Last.
type SourceLoadReply struct {
	SessionID string            `json:"sessionId,omitempty"`
	Found     bool              `json:"found"`
	Entries   []json.RawMessage `json:"entries"`
	Part      *SourcePart       `json:"part,omitempty"`
	Next      string            `json:"next,omitempty"`
}

// SourcePart is a piece of the text of an entry too large for one page.
type SourcePart struct {
	Text string `json:"text"`
	Last bool   `json:"last"`
}

// SourceListRequest is a request on sessions.api.source.list: the
// transcripts of one project (main transcripts only), a page at a time.
// Limit is the page size (0: SourcePageDefault; at most SourcePageMax);
// Cursor is the previous reply's Next.
type SourceListRequest struct {
	Format     string `json:"format"`
	ProjectKey string `json:"projectKey"`
	Limit      int    `json:"limit,omitempty"`
	Cursor     string `json:"cursor,omitempty"`
}

// Page sizes of the source listings.
const (
	SourcePageDefault = 500
	SourcePageMax     = 1000
)

// SourceListed is one listed transcript: its key and the epoch
// milliseconds of its last write through the source endpoints (the
// writer's clock, as the SDK's summaries require).
type SourceListed struct {
	SessionKey string `json:"sessionKey"`
	Mtime      int64  `json:"mtime"`
}

// SourceListReply lists a page of a project's transcripts; Next, when
// set, is the Cursor of the next page. A transcript written again while
// the listing pages may be listed twice (the later one wins), never missed.
type SourceListReply struct {
	Sessions []SourceListed `json:"sessions"`
	Next     string         `json:"next,omitempty"`
}

// SourceSubkeysRequest is a request on sessions.api.source.subkeys: the
// subpaths stored under one transcript, paged as SourceListRequest.
type SourceSubkeysRequest struct {
	Format     string `json:"format"`
	ProjectKey string `json:"projectKey"`
	SessionKey string `json:"sessionKey"`
	Limit      int    `json:"limit,omitempty"`
	Cursor     string `json:"cursor,omitempty"`
}

// SourceSubkeysReply lists a page of the subpaths (subagent transcripts).
type SourceSubkeysReply struct {
	Subkeys []string `json:"subkeys"`
	Next    string   `json:"next,omitempty"`
}

// ChainHash is the hash chain's link of a stored body (DESIGN.md section
// 2): the first 16 bytes of its SHA-256, in lower-case hex. The next event
// of the session carries it in SL-Prev, and AppendReply.Hash is it for the
// last event stored.
func ChainHash(body []byte) string {
	sum := sha256.Sum256(body)
	return hex.EncodeToString(sum[:16])
}
