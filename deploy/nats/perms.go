// Package natsauth is the one definition of what each sessionlog NATS user
// may do: the services, the agents and the operators. auth.conf (and its
// copy in deploy/k8s) spells the same lists for nats-server's config file;
// a test fails when the two disagree. `sessionlog up` builds its embedded
// server's users from these values. Rationale: docs/adr/004-nats-permissions.md.
package natsauth

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

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
	// BucketSnapshots holds the writer's snapshots of sessions' state
	// (DESIGN.md section 2).
	BucketSnapshots = "SESSION_SNAPSHOTS"
	// BucketUsage holds each tenant's sessions and stored bytes, kept by
	// the writers and given back by the eraser (ADR 010).
	BucketUsage = "TENANT_USAGE"
	// BucketLost keeps what nats-server said it lost of a stream when it
	// recovered its files (DESIGN.md section 2), kept by the projector and
	// verify past the server's restart.
	BucketLost = "SESSION_LOST"
	// BucketKeys holds each session's data key when bodies are sealed
	// (docs/adr/011-sealed-bodies.md): the services read and create keys,
	// the eraser deletes them, agents never see them.
	BucketKeys = "SESSION_KEYS"
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
		"KV_"+BucketSources, "KV_"+BucketSnapshots, "KV_"+BucketUsage, "KV_"+BucketLost, "KV_"+BucketErased, "KV_"+BucketKeys, StreamAudit)
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
// stream but never write them, and delete nothing but the writer's
// superseded snapshot parts (secure deletes in KV_SESSION_SNAPSHOTS, so
// that an erased session's state leaves no byte there), the forker's
// record of a copy whose parent or child is erased (in KV_SESSION_FORKS,
// ADR 009 "Forks in flight") and the source service's owner record of an
// append the writer refused (in KV_SESSION_SOURCES, DESIGN.md section 15).
func Service() *server.Permissions {
	p := services()
	p.Publish.Allow = append(p.Publish.Allow, "$JS.API.STREAM.MSG.DELETE.KV_"+BucketSnapshots, "$JS.API.STREAM.MSG.DELETE.KV_"+BucketForks,
		"$JS.API.STREAM.MSG.DELETE.KV_"+BucketSources)
	for _, st := range streams() {
		if st != "KV_"+BucketSnapshots && st != "KV_"+BucketForks && st != "KV_"+BucketSources {
			p.Publish.Deny = append(p.Publish.Deny, "$JS.API.STREAM.MSG.DELETE."+st)
		}
	}
	p.Publish.Deny = append(p.Publish.Deny,
		"$JS.API.STREAM.PURGE.>",
		"$KV."+BucketErased+".>",
		"sessions.audit.>",
	)
	return p
}

// sessionStreams are the log's streams: SESSIONS and its partitions.
func sessionStreams() []string {
	out := []string{StreamSessions}
	for n := range MaxPartitions {
		out = append(out, StreamSessions+"-"+strconv.Itoa(n))
	}
	return out
}

// Eraser is the permission set of the "eraser" user: the repairer, which
// serves sessions.api.erase and retention (DESIGN.md section 14). It has
// the services' rights plus the secure delete of the log's messages and of
// the session's KV records, the erasure records and the audit stream's
// subjects, and the purge of the log's streams (an erased session's
// subject once its key is destroyed, docs/adr/011-sealed-bodies.md); it
// may neither delete a stream nor purge any other.
func Eraser() *server.Permissions {
	p := services()
	p.Publish.Allow = append(p.Publish.Allow,
		"$KV."+BucketErased+".>",
		AuditSubjects,
	)
	for _, st := range sessionStreams() {
		p.Publish.Allow = append(p.Publish.Allow, "$JS.API.STREAM.MSG.DELETE."+st, "$JS.API.STREAM.PURGE."+st)
	}
	// The erased session's lease, claim, fork, snapshot, source index
	// records and data key.
	for _, b := range []string{BucketLeases, BucketClaims, BucketForks, BucketSnapshots, BucketSources, BucketKeys} {
		p.Publish.Allow = append(p.Publish.Allow, "$JS.API.STREAM.MSG.DELETE.KV_"+b)
	}
	for _, st := range streams()[len(sessionStreams()):] {
		p.Publish.Deny = append(p.Publish.Deny, "$JS.API.STREAM.PURGE."+st)
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
		"$KV." + BucketSnapshots + ".>",
		"$KV." + BucketUsage + ".>",
		"$KV." + BucketLost + ".>",
		"$KV." + BucketKeys + ".>",
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
				// The sessions it may read, from the projector (section 12).
				"sessions.api.list",
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

// Accounts (ADR 010). The services, the eraser and the operators live in
// ServiceAccount, which holds JetStream and exports the agents' subjects
// (AgentAPI) as services. Agents live in tenant accounts that import them
// with share: true, so that nats-server itself adds to every request the
// Nats-Request-Info header naming the requester's account (its tenant) and
// user (the agent): the services never take identity from the request.
// DefaultTenant is the tenant of the shipped `agent` user and of `up
// --nats-user`, whose sessions keep the subjects and ids they had.
const (
	ServiceAccount = "SESSIONLOG"
	DefaultTenant  = "AGENTS"
)

// AgentAPI lists the subjects ServiceAccount exports and every tenant
// imports: the requests of an agent (DESIGN.md sections 4, 12, 15) and its
// transient live events (section 2), which arrive stamped with their
// sender like the requests.
func AgentAPI() []string {
	return []string{
		"sessions.api.append",
		"sessions.api.heartbeat",
		"sessions.api.read",
		"sessions.api.fork",
		"sessions.api.list",
		"sessions.api.source.append",
		"sessions.api.source.load",
		"sessions.api.source.list",
		"sessions.api.source.subkeys",
		"sessions.live.*",
	}
}

// TenantAPI is what a tenant's account imports of AgentAPI: all of it, for
// every tenant. The source service scopes the transcript keys by tenant
// and serves an agent only the transcripts whose sessions it may read
// (ADR 010), as the writer does sessions.
func TenantAPI(tenant string) []string { return AgentAPI() }

// Tenant is an account of agents: its name (an account name of letters,
// digits and '-') and its agents' users.
type Tenant struct {
	Name  string
	Users []TenantUser
}

// TenantUser is an agent's user. Password is the value as nats-server
// config reads it: empty means the environment variable PasswordVar names.
type TenantUser struct {
	Name     string
	Password string
}

// PasswordVar is the environment variable holding a tenant user's password:
// SESSIONLOG_AGENT_PASSWORD for the default tenant's `agent` (as before
// tenants), else SESSIONLOG_<TENANT>_<USER>_PASSWORD, upper case, '-' as '_'.
func PasswordVar(tenant, user string) string {
	if tenant == DefaultTenant && user == "agent" {
		return "SESSIONLOG_AGENT_PASSWORD"
	}
	up := func(s string) string { return strings.ToUpper(strings.ReplaceAll(s, "-", "_")) }
	return "SESSIONLOG_" + up(tenant) + "_" + up(user) + "_PASSWORD"
}

// DefaultTenants is the tenants section deploy/nats/auth.conf ships: the
// default tenant with the one `agent` user.
func DefaultTenants() []Tenant {
	return []Tenant{{Name: DefaultTenant, Users: []TenantUser{{Name: "agent"}}}}
}

// AgentOf is the permission set of an agent user of a tenant. The default
// tenant's one user keeps today's rights (Agent): every connection of it
// is one identity, so sharing _INBOX.> and sessions.live.> shares nothing
// with another agent. A user of any other tenant subscribes to its own
// inbox prefix alone (InboxPrefix), and to no live events: another user of
// its tenant can neither read its replies nor watch its sessions.
func AgentOf(tenant, user string) *server.Permissions {
	p := Agent()
	if tenant == DefaultTenant {
		return p
	}
	p.Publish.Allow = TenantAPI(tenant)
	p.Subscribe.Allow = []string{InboxPrefix(user) + ".>"}
	p.Subscribe.Deny = append(p.Subscribe.Deny, "sessions.live.>")
	return p
}

// InboxPrefix is the inbox prefix (nats.CustomInboxPrefix) the agent user
// of a tenant other than the default must use: _INBOX.<user>.
func InboxPrefix(user string) string { return AgentInboxPrefix + "." + user }

// validName: an account or user name the generated config may carry.
func validName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}

// checkTenants refuses tenants the generated config could not keep apart:
// a bad or repeated name, the services' or system account, a user in two
// tenants, more than the one `agent` user in the default tenant (its
// user shares _INBOX.>).
func checkTenants(tenants []Tenant) error {
	accounts, users := map[string]bool{}, map[string]bool{}
	for _, t := range tenants {
		switch {
		case !validName(t.Name) || strings.Contains(t.Name, "_"):
			// No '_': a tenant's sessions are stored as _T<tenant>_<id>.
			return fmt.Errorf("tenant %q: a name is 1 to 64 letters, digits and '-'", t.Name)
		case t.Name == ServiceAccount || t.Name == "SYS" || t.Name == "$G" || t.Name == "$SYS":
			return fmt.Errorf("tenant %q: the name is reserved", t.Name)
		case accounts[t.Name] || (t.Name != DefaultTenant && strings.EqualFold(t.Name, DefaultTenant)):
			return fmt.Errorf("tenant %q twice", t.Name)
		case len(t.Users) == 0:
			return fmt.Errorf("tenant %q has no users", t.Name)
		case t.Name == DefaultTenant && len(t.Users) != 1:
			return fmt.Errorf("tenant %s holds one user (\"agent\" as shipped): give other agents a tenant of their own", DefaultTenant)
		}
		accounts[t.Name] = true
		for _, u := range t.Users {
			if !validName(u.Name) {
				return fmt.Errorf("tenant %s: user %q: a name is 1 to 64 letters, digits, '-' and '_'", t.Name, u.Name)
			}
			if reservedUsers[u.Name] {
				return fmt.Errorf("tenant %s: user %q is a sessionlog user", t.Name, u.Name)
			}
			if users[u.Name] {
				return fmt.Errorf("user %q in two tenants (or twice)", u.Name)
			}
			users[u.Name] = true
		}
	}
	return nil
}

// reservedUsers are the names of the service account's users.
var reservedUsers = map[string]bool{"service": true, "eraser": true, "operator": true, "sys": true}

// TenantsBegin and TenantsEnd enclose the tenants' accounts in auth.conf:
// TenantsConf's output, which a test compares with DefaultTenants and
// WithTenants replaces.
const (
	TenantsBegin = "  # BEGIN tenants: generated by natsauth.TenantsConf (deploy/nats/perms.go); do not edit by hand\n"
	TenantsEnd   = "  # END tenants\n"
)

// TenantsConf spells the tenants' accounts for nats-server's config file,
// inside its accounts block: each tenant's users with AgentOf's rights,
// and the imports of AgentAPI from ServiceAccount with share: true.
func TenantsConf(tenants []Tenant) (string, error) {
	if err := checkTenants(tenants); err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString(TenantsBegin)
	for _, t := range tenants {
		fmt.Fprintf(&b, "  %s {\n    users: [\n", t.Name)
		for _, u := range t.Users {
			pw := "$" + PasswordVar(t.Name, u.Name)
			if u.Password != "" {
				pw = strconv.Quote(u.Password)
			}
			fmt.Fprintf(&b, "      {\n        user: %q\n        password: %s\n        permissions: {\n", u.Name, pw)
			p := AgentOf(t.Name, u.Name)
			writeSubjects(&b, "publish", p.Publish)
			writeSubjects(&b, "subscribe", p.Subscribe)
			b.WriteString("        }\n      }\n")
		}
		b.WriteString("    ]\n    imports: [\n")
		for _, s := range TenantAPI(t.Name) {
			fmt.Fprintf(&b, "      { service: { account: %q, subject: %q }, share: true }\n", ServiceAccount, s)
		}
		b.WriteString("    ]\n  }\n")
	}
	b.WriteString(TenantsEnd)
	return b.String(), nil
}

func writeSubjects(b *strings.Builder, name string, p *server.SubjectPermission) {
	fmt.Fprintf(b, "          %s: {\n", name)
	for _, l := range []struct {
		name string
		subs []string
	}{{"allow", p.Allow}, {"deny", p.Deny}} {
		if len(l.subs) == 0 {
			continue
		}
		fmt.Fprintf(b, "            %s: [\n", l.name)
		for _, s := range l.subs {
			fmt.Fprintf(b, "              %q\n", s)
		}
		b.WriteString("            ]\n")
	}
	b.WriteString("          }\n")
}

// WithTenants returns auth.conf with its tenants section replaced by
// TenantsConf(tenants): how a deployment adds tenants and agents.
func WithTenants(authConf []byte, tenants []Tenant) ([]byte, error) {
	conf, err := TenantsConf(tenants)
	if err != nil {
		return nil, err
	}
	s := string(authConf)
	i, j := strings.Index(s, TenantsBegin), strings.Index(s, TenantsEnd)
	if i < 0 || j < i {
		return nil, fmt.Errorf("no tenants section (%q ... %q)", strings.TrimSpace(TenantsBegin), strings.TrimSpace(TenantsEnd))
	}
	return []byte(s[:i] + conf + s[j+len(TenantsEnd):]), nil
}

// Accounts gives an embedded server's options what TenantsConf spells:
// the service account (JetStream enabled) exporting AgentAPI, and one
// account per tenant importing it with share: true. It returns the service
// account, for the caller's service and operator users, and the tenants'
// users (their passwords as given), which it adds to opts.Users.
func Accounts(opts *server.Options, tenants []Tenant) (*server.Account, error) {
	if err := checkTenants(tenants); err != nil {
		return nil, err
	}
	// Enabling JetStream for an account is a config setting alone.
	conf := "accounts {\n  " + ServiceAccount + " { jetstream: enabled }\n"
	for _, t := range tenants {
		conf += "  " + t.Name + " { }\n"
	}
	if err := opts.ProcessConfigString(conf + "}\n"); err != nil {
		return nil, fmt.Errorf("accounts: %w", err)
	}
	byName := map[string]*server.Account{}
	for _, a := range opts.Accounts {
		byName[a.Name] = a
	}
	svc := byName[ServiceAccount]
	for _, s := range AgentAPI() {
		if err := svc.AddServiceExport(s, nil); err != nil {
			return nil, fmt.Errorf("export %s: %w", s, err)
		}
	}
	for _, t := range tenants {
		a := byName[t.Name]
		for _, s := range TenantAPI(t.Name) {
			if err := a.AddServiceImport(svc, s, s); err != nil {
				return nil, fmt.Errorf("tenant %s: import %s: %w", t.Name, s, err)
			}
			if err := a.SetServiceImportSharing(svc, s, true); err != nil {
				return nil, fmt.Errorf("tenant %s: share %s: %w", t.Name, s, err)
			}
		}
		for _, u := range t.Users {
			opts.Users = append(opts.Users, &server.User{Username: u.Name, Password: u.Password, Account: a, Permissions: AgentOf(t.Name, u.Name)})
		}
	}
	return svc, nil
}
