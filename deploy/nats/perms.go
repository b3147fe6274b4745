// Package natsauth is the one definition of what each sessionlog NATS user
// may do: the services, the agents and the operators. auth.conf (and its
// copy in deploy/k8s) spells the same lists for nats-server's config file;
// a test fails when the two disagree. `sessionlog up` builds its embedded
// server's users from these values. Rationale: docs/adr/004-nats-permissions.md.
package natsauth

import (
	"slices"
	"strconv"

	"github.com/nats-io/nats-server/v2/server"
)

// Inbox prefixes. Every service connection uses ServiceInboxPrefix and the
// SRE verbs use OperatorInboxPrefix (nats.CustomInboxPrefix), so JetStream
// deliveries and replies meant for them never land under _INBOX, which
// agents may subscribe to for their own replies. Agents may neither
// subscribe nor publish to these prefixes.
const (
	ServiceInboxPrefix  = "_SL_SVC"
	OperatorInboxPrefix = "_SL_OP"
	AgentInboxPrefix    = "_INBOX"
)

// Names of the contract (DESIGN.md sections 2, 12, 14) and of the buckets the
// services keep. Kept here, not imported, so that this package depends on
// nothing of the services; the e2e permission tests catch a service that
// uses a subject missing here.
const (
	StreamSessions = "SESSIONS"
	BucketLeases   = "SESSION_LEASES"
	BucketClaims   = "SESSION_CLAIMS"
	BucketForks    = "SESSION_FORKS"
	BucketErased   = "SESSION_ERASED"
	StreamAudit    = "SESSION_AUDIT"
	// AuditSubjects are the audit stream's subjects (one per erased session).
	AuditSubjects = "sessions.audit.erased.*"
	BucketLayout  = "SESSION_LAYOUT"
	// BucketSources is the writer's index of the transcripts written
	// through sessions.api.source.* (DESIGN.md section 15).
	BucketSources = "SESSION_SOURCES"
	// MaxPartitions is the most session streams a store may have
	// (DESIGN.md section 11): SESSIONS-0 ... SESSIONS-15.
	MaxPartitions = 16
)

// streams are the streams the services use: the log (SESSIONS, or its
// partitions SESSIONS-<p>), the KV buckets and the audit stream of
// erasures (which every service may read).
func streams() []string {
	out := []string{StreamSessions}
	for p := range MaxPartitions {
		out = append(out, StreamSessions+"-"+strconv.Itoa(p))
	}
	return append(out, "KV_"+BucketLeases, "KV_"+BucketClaims, "KV_"+BucketForks, "KV_"+BucketLayout,
		"KV_"+BucketSources, "KV_"+BucketErased, StreamAudit)
}

// jsAPI lists the JetStream API subjects the services call on one stream:
// provisioning and lookup, reads (leader and direct gets), the consumers of
// the projector, the repairer's lease watch and the forker's record list
// (ordered consumers, created, polled, recreated and deleted). No stream
// delete, purge or message delete: a service never removes stored data.
func jsAPI(stream string) []string {
	return []string{
		"$JS.API.STREAM.CREATE." + stream,
		"$JS.API.STREAM.UPDATE." + stream,
		"$JS.API.STREAM.INFO." + stream,
		"$JS.API.STREAM.MSG.GET." + stream,
		"$JS.API.DIRECT.GET." + stream,
		"$JS.API.DIRECT.GET." + stream + ".>",
		"$JS.API.CONSUMER.CREATE." + stream,
		"$JS.API.CONSUMER.CREATE." + stream + ".>",
		"$JS.API.CONSUMER.DURABLE.CREATE." + stream + ".*",
		"$JS.API.CONSUMER.INFO." + stream + ".*",
		"$JS.API.CONSUMER.DELETE." + stream + ".*",
		"$JS.API.CONSUMER.MSG.NEXT." + stream + ".*",
		// Acknowledgements and flow control of the consumers' deliveries.
		"$JS.ACK." + stream + ".>",
		"$JS.FC." + stream + ".>",
	}
}

// Service is the permission set of the "service" user: the writer,
// projector and forker. They read the erasure records and the audit
// stream but never write them, and never delete anything.
func Service() *server.Permissions {
	p := services()
	p.Publish.Deny = append(p.Publish.Deny,
		"$JS.API.STREAM.MSG.DELETE.>",
		"$KV."+BucketErased+".>",
		"sessions.audit.>",
	)
	return p
}

// Eraser is the permission set of the "eraser" user: the repairer, which
// serves sessions.api.erase and retention (DESIGN.md section 14). It has
// the services' rights plus the secure delete of the log's messages and of
// the session's KV records, the erasure records and the audit stream's
// subjects; it may still neither delete nor purge a stream.
func Eraser() *server.Permissions {
	p := services()
	p.Publish.Allow = append(p.Publish.Allow,
		"$JS.API.STREAM.MSG.DELETE."+StreamSessions,
		"$KV."+BucketErased+".>",
		AuditSubjects,
	)
	for n := range MaxPartitions {
		p.Publish.Allow = append(p.Publish.Allow, "$JS.API.STREAM.MSG.DELETE."+StreamSessions+"-"+strconv.Itoa(n))
	}
	// The erased session's lease, claim, fork and source index records.
	for _, b := range []string{BucketLeases, BucketClaims, BucketForks, BucketSources} {
		p.Publish.Allow = append(p.Publish.Allow, "$JS.API.STREAM.MSG.DELETE.KV_"+b)
	}
	return p
}

// services is what the service and eraser users share.
func services() *server.Permissions {
	pub := []string{
		"sessions.ev.>",
		"sessions.*.ev.>",
		"$KV." + BucketLeases + ".>",
		"$KV." + BucketClaims + ".>",
		"$KV." + BucketForks + ".>",
		"$KV." + BucketLayout + ".>",
		"$KV." + BucketSources + ".>",
		"$JS.API.INFO",
		// The projector relays the dashboard's actions as requests (no
		// more than the log subjects above already allow a service).
		"sessions.api.append",
		"sessions.api.fork",
		"sessions.api.repair",
		"sessions.api.read",
	}
	for _, s := range streams() {
		pub = append(pub, jsAPI(s)...)
	}
	// The provisioning service spreads the partitions' leaders over the
	// nodes (logstore.SpreadLeaders); the leader of SESSIONS and of the
	// buckets it never moves.
	for p := range MaxPartitions {
		pub = append(pub, "$JS.API.STREAM.LEADER.STEPDOWN."+StreamSessions+"-"+strconv.Itoa(p))
	}
	return &server.Permissions{
		Publish: &server.SubjectPermission{
			Allow: pub,
			// Outside the allow list already; spelled out so that a later,
			// wider allow entry cannot re-open them by accident.
			Deny: []string{
				"$JS.API.STREAM.DELETE.>",
				"$JS.API.STREAM.PURGE.>",
			},
		},
		Subscribe: &server.SubjectPermission{
			Allow: []string{
				"sessions.api.>",
				"sessions.live.>",
				ServiceInboxPrefix + ".>",
				"$SRV.>",
			},
		},
		// Answers to requests (agents' appends, $SRV pings) go to whatever
		// reply subject the request named, once each.
		Response: &server.ResponsePermission{MaxMsgs: server.DEFAULT_ALLOW_RESPONSE_MAX_MSGS, Expires: server.DEFAULT_ALLOW_RESPONSE_EXPIRATION},
	}
}

// Agent is the permission set of the "agent" user: requests to the
// services' agent subjects, transient live events, its own replies.
func Agent() *server.Permissions {
	return &server.Permissions{
		Publish: &server.SubjectPermission{
			Allow: []string{
				"sessions.api.append",
				"sessions.api.heartbeat",
				"sessions.api.read",
				"sessions.api.fork",
				// An agent's own transcript entries (section 15).
				"sessions.api.source.append",
				"sessions.api.source.load",
				"sessions.api.source.list",
				"sessions.api.source.subkeys",
				"sessions.live.*",
			},
			Deny: []string{
				"sessions.ev.>",
				"sessions.*.ev.>",
				"$JS.>",
				"$KV.>",
				"$SRV.>",
				ServiceInboxPrefix + ".>",
				OperatorInboxPrefix + ".>",
			},
		},
		Subscribe: &server.SubjectPermission{
			Allow: []string{
				AgentInboxPrefix + ".>",
				"sessions.live.>",
			},
			Deny: []string{
				"sessions.ev.>",
				"sessions.*.ev.>",
				"sessions.api.>",
				"$JS.>",
				"$KV.>",
				"$SRV.>",
				ServiceInboxPrefix + ".>",
				OperatorInboxPrefix + ".>",
			},
		},
	}
}

// Operator is the permission set of the "operator" user: nil, the whole
// account (stream administration, sessions.api.erase, repair, every read).
// No other user may publish sessions.api.erase: the services' allow lists
// do not name it, and the agents' do not either.
func Operator() *server.Permissions { return nil }

// Equal reports whether two permission sets grant the same: the same allow
// and deny subjects (in any order) and the same response permission.
func Equal(a, b *server.Permissions) bool {
	if a == nil || b == nil {
		return a == b
	}
	return equalSubjects(a.Publish, b.Publish) && equalSubjects(a.Subscribe, b.Subscribe) &&
		equalResponse(a.Response, b.Response)
}

func equalSubjects(a, b *server.SubjectPermission) bool {
	if a == nil || b == nil {
		return a == b
	}
	return sameSet(a.Allow, b.Allow) && sameSet(a.Deny, b.Deny)
}

func equalResponse(a, b *server.ResponsePermission) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(slices.Compact(a), slices.Compact(b))
}
