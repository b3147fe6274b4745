// Package scripttest runs a service's rule scripts (cockroachdb/datadriven,
// in the service's testdata) on two logs: internal/memlog, and
// internal/logstore on an embedded NATS server. A script's expected output
// is the same on both, so every case it holds checks memlog against the
// log it stands in for.
package scripttest

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/nats-io/nats.go"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/memlog"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/pkg/session"
	"github.com/sessionlog/sessionlog/pkg/session/sessiontest"
)

// Log is what the scripts themselves do to a log, beside what the service
// under test does.
type Log interface {
	Tail(ctx context.Context, sessionID string) (logstore.Tail, error)
	Append(ctx context.Context, req logstore.AppendRequest) (logstore.AppendResult, error)
	ReadJudged(ctx context.Context, j *logstore.Judge, fn func(m *logstore.Msg, ev *schema.Envelope) error) (logstore.Tail, error)
	RenewLease(ctx context.Context, sessionID, holder string, now time.Time) error
	LeaseRecord(ctx context.Context, sessionID string) (logstore.LeaseRecord, error)
	EndLease(ctx context.Context, sessionID string, revision uint64) error
	GetClaim(ctx context.Context, sessionID string) (*logstore.Claim, error)
	MarkErased(ctx context.Context, e logstore.Erasure) (logstore.Erasure, uint64, error)
}

var (
	_ Log = (*memlog.Log)(nil)
	_ Log = (*logstore.Store)(nil)
)

// Backend is one log a script runs on.
type Backend struct {
	Name string
	Log  Log
	// Mem is the in-memory log (nil on logstore); Store the JetStream one
	// (nil on memlog).
	Mem   *memlog.Log
	Store *logstore.Store
	// Conn is the backend's NATS connection; on memlog one never opened
	// (the services' constructors want one; the scripts never serve).
	Conn *nats.Conn
	nc   *nats.Conn
}

// Names of the backends, in the order Run runs them.
var Names = []string{"memlog", "logstore"}

// Commands runs a script's commands of one service. id is the session
// the command names (id=, else the script's default).
type Commands func(t *testing.T, td *datadriven.TestData, id string) string

// Run runs every script in dir on each backend, a fresh log for each
// script and backend; start builds the service on the backend and
// returns its commands. The commands every script has are run here:
//
//	append [id=]           the input's events (Append)
//	claim [id=] holder=H   H takes or renews the session's lease
//	end-lease [id=]        the lease is deleted: its holder is gone
//	around [id=] [seq=N] [garbage]
//	                       a message stored around the writer (PutAround),
//	                       with SL-Seq N (none without seq): the bytes of
//	                       no event (garbage), else the input's one event
//	                       (of the session unless it names another)
//	show [id=]             the session as the log judges it (Show)
func Run(t *testing.T, dir string, cfg logstore.Config, defaultID string, start func(t *testing.T, b *Backend) Commands) {
	RunOn(t, Names, dir, cfg, defaultID, start)
}

// RunOn is Run on the named backends only: scripts of what one backend
// alone can do to a log (memlog's RollBack).
func RunOn(t *testing.T, names []string, dir string, cfg logstore.Config, defaultID string, start func(t *testing.T, b *Backend) Commands) {
	datadriven.Walk(t, dir, func(t *testing.T, path string) {
		for _, name := range names {
			t.Run(name, func(t *testing.T) {
				b := Open(t, name, cfg)
				cmds := start(t, b)
				datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
					id := defaultID
					td.MaybeScanArgs(t, "id", &id)
					switch td.Cmd {
					case "append":
						return b.Append(t, id, td.Input)
					case "claim":
						var holder string
						td.ScanArgs(t, "holder", &holder)
						if err := b.Log.RenewLease(context.Background(), id, holder, time.Now()); err != nil {
							t.Fatal(err)
						}
						return "ok\n"
					case "end-lease":
						b.EndLease(t, id)
						return "ok\n"
					case "around":
						var seq uint64
						td.MaybeScanArgs(t, "seq", &seq)
						body := []byte("\x00 not an event")
						if !td.HasArg("garbage") {
							body = Around(t, id, td.Input)
						}
						b.PutAround(t, id, body, seq)
						return "ok\n"
					case "show":
						return b.Show(t, id)
					}
					return cmds(t, td, id)
				})
			})
		}
	})
}

// Open returns a fresh log of the named backend.
func Open(t *testing.T, name string, cfg logstore.Config) *Backend {
	t.Helper()
	switch name {
	case "memlog":
		l, err := memlog.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return &Backend{Name: name, Log: l, Mem: l, Conn: new(nats.Conn)}
	case "logstore":
		d := natstest.RunLayout(t, natstest.Layout{Partitions: max(cfg.Partitions, 1), Nodes: 1})
		nc := d.Connect()
		st, err := logstore.Open(context.Background(), nc, cfg)
		if err != nil {
			t.Fatal(err)
		}
		d.WaitLeaders(nc)
		return &Backend{Name: name, Log: st, Store: st, Conn: nc, nc: nc}
	}
	t.Fatalf("no backend %q", name)
	return nil
}

// Append appends the events of input (sessiontest's short form, one a
// line; # starts a comment) to the session after its tail, in one batch,
// as a writer would: seqs follow the tail's, event ids are e<seq>.
func (b *Backend) Append(t *testing.T, id, input string) string {
	t.Helper()
	ctx := context.Background()
	tail, err := b.Log.Tail(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	var evs []schema.Envelope
	for _, line := range strings.Split(input, "\n") {
		if line = strings.TrimSpace(line); line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		e := sessiontest.Event(t, line)
		e.SessionID, e.Seq = id, tail.Seq+uint64(len(evs))+1
		e.EventID = "e" + strconv.FormatUint(e.Seq, 10)
		e.Time = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(e.Seq) * time.Second)
		evs = append(evs, *e)
	}
	res, err := b.Log.Append(ctx, logstore.AppendRequest{SessionID: id, ExpectedStreamSeq: tail.StreamSeq, Events: evs})
	if err != nil {
		return Error(err)
	}
	return fmt.Sprintf("appended seqs %d-%d\n", res.FirstSeq, res.LastSeq)
}

// Around is the stored body of line (sessiontest's short form), an event
// of the session unless it names another, at a fixed time.
func Around(t *testing.T, id, line string) []byte {
	t.Helper()
	e := sessiontest.Event(t, strings.TrimSpace(line))
	if e.SessionID == "" {
		e.SessionID = id
	}
	e.Time = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	b, err := schema.Encode(e)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// PutAround stores body on the session's subject around every check (a
// message a writer never wrote); seq 0: without an SL-Seq header.
func (b *Backend) PutAround(t *testing.T, id string, body []byte, seq uint64) {
	t.Helper()
	h := nats.Header{}
	h.Set(logstore.HeaderMsgID, id+":around-"+strconv.Itoa(len(body)))
	if seq != 0 {
		h.Set(logstore.HeaderSeq, strconv.FormatUint(seq, 10))
	}
	b.PutSubject(t, id, "", h, body)
}

// PutSubject stores body with headers h on the subject of session id, or
// (token set) on the subject of id's stream whose last token is token: a
// subject that names no session when token is no session id.
func (b *Backend) PutSubject(t *testing.T, id, token string, h nats.Header, body []byte) {
	t.Helper()
	var loc logstore.Location
	var err error
	if b.Mem != nil {
		loc, err = b.Mem.Locate(id)
	} else {
		loc, err = b.Store.Locate(id)
	}
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		loc.Subject = strings.TrimSuffix(loc.Subject, id) + token
	}
	if b.Mem != nil {
		b.Mem.PutSubject(loc.Stream, loc.Subject, h, body)
		return
	}
	m := nats.NewMsg(loc.Subject)
	m.Header, m.Data = h, body
	if _, err := natstest.JetStream(t, b.nc).PublishMsg(context.Background(), m); err != nil {
		t.Fatal(err)
	}
}

// Snapshot stores the session's snapshot at its event of seq seq, as a
// writer stores one; bad: one whose hash is not the stored body's (which
// every reader must ignore).
func (b *Backend) Snapshot(t *testing.T, id string, seq uint64, bad bool) {
	t.Helper()
	ctx := context.Background()
	st := session.New(id)
	var at logstore.Tail
	_, err := b.Log.ReadJudged(ctx, &logstore.Judge{SessionID: id}, func(m *logstore.Msg, ev *schema.Envelope) error {
		if err := st.Apply(ev); err != nil {
			return err
		}
		at = logstore.Tail{Seq: ev.Seq, StreamSeq: m.StreamSeq, EventID: ev.EventID, Hash: logstore.ChainHash(m.Data)}
		if ev.Seq == seq {
			return logstore.ErrStop
		}
		return nil
	})
	if err != nil || at.Seq != seq {
		t.Fatalf("%s has no event of seq %d (%v)", id, seq, err)
	}
	if bad {
		at.Hash = logstore.ChainHash([]byte("another body"))
	}
	h := &logstore.SnapshotHead{Version: logstore.SnapshotVersion, Seq: at.Seq, StreamSeq: at.StreamSeq, Hash: at.Hash}
	if b.Mem != nil {
		b.Mem.PutSnapshot(id, &logstore.SnapshotBase{Head: h, Tail: at, State: st})
		return
	}
	data, err := st.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if h.State, err = b.Store.PutSnapshotPart(ctx, id, "state", data); err != nil {
		t.Fatal(err)
	}
	if err := b.Store.PutSnapshotHead(ctx, id, *h); err != nil {
		t.Fatal(err)
	}
}

// Erase leaves the session as a finished erase does: its erasure record,
// and none of its events.
func (b *Backend) Erase(t *testing.T, id string) {
	t.Helper()
	ctx := context.Background()
	if _, _, err := b.Log.MarkErased(ctx, logstore.Erasure{SessionID: id, By: "script", Reason: "test", Done: true, Phase: logstore.ErasePhaseDone}); err != nil {
		t.Fatal(err)
	}
	if b.Store != nil {
		if _, err := b.Store.EraseEvents(ctx, id, nil); err != nil {
			t.Fatal(err)
		}
		return
	}
	page, err := b.Mem.StoredPage(ctx, id, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	seqs := make([]uint64, len(page))
	for i, m := range page {
		seqs[i] = m.StreamSeq
	}
	if err := b.Mem.SecureDelete(ctx, id, seqs, 1, nil); err != nil {
		t.Fatal(err)
	}
}

// EndLease deletes the session's lease, as a repairer ends a lapsed one:
// its holder is gone.
func (b *Backend) EndLease(t *testing.T, id string) {
	t.Helper()
	ctx := context.Background()
	rec, err := b.Log.LeaseRecord(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Log.EndLease(ctx, id, rec.Revision); err != nil {
		t.Fatal(err)
	}
}

// Show prints the session as the log judges it: each event (seq, type,
// ids, data), the verdict on the first unreadable message, and the
// session's lease and claim.
func (b *Backend) Show(t *testing.T, id string) string {
	t.Helper()
	ctx := context.Background()
	var out strings.Builder
	_, err := b.Log.ReadJudged(ctx, &logstore.Judge{SessionID: id}, func(_ *logstore.Msg, e *schema.Envelope) error {
		out.WriteString(Event(e))
		return nil
	})
	if err != nil {
		out.WriteString(Error(err))
	}
	rec, err := b.Log.LeaseRecord(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case rec.Live():
		fmt.Fprintf(&out, "lease: held by %s\n", rec.Lease.Holder)
	case rec.Revision != 0:
		out.WriteString("lease: gone\n")
	}
	c, err := b.Log.GetClaim(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if c != nil {
		fmt.Fprintf(&out, "claim: %s\n", c.Holder)
	}
	return out.String()
}

// Event is one line: seq, type, its ids, synthetic, and its data (times
// in it masked).
func Event(e *schema.Envelope) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d %s", e.Seq, e.Type)
	for _, f := range []struct{ k, v string }{{"turn", e.TurnID}, {"step", e.StepID}, {"attempt", e.AttemptID}, {"call", e.ToolCallID}} {
		if f.v != "" {
			fmt.Fprintf(&b, " %s=%s", f.k, f.v)
		}
	}
	if e.Synthetic {
		b.WriteString(" synthetic")
	}
	if len(e.Data) > 0 && string(e.Data) != "{}" {
		var v any
		if json.Unmarshal(e.Data, &v) == nil {
			d, _ := json.Marshal(v) // members in order
			fmt.Fprintf(&b, " %s", Mask(string(d)))
		}
	}
	b.WriteString("\n")
	return b.String()
}

var times = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)`)

// Mask replaces the times in s with <time>: a lease's are the server's.
func Mask(s string) string { return times.ReplaceAllString(s, "<time>") }

// Error is an error as a script prints it: its contract code and message.
func Error(err error) string {
	return fmt.Sprintf("error %s: %s\n", schema.CodeOf(err), Mask(err.Error()))
}
