package memlog_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/memlog"
	"github.com/sessionlog/sessionlog/internal/memlog/scripttest"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// contract is what the services' logs share that the scripts reach only
// in part.
type contract interface {
	scripttest.Log
	Messages(req *logstore.AppendRequest) ([]*nats.Msg, error)
	AppendGroup(ctx context.Context, parts []logstore.GroupPart) ([]logstore.AppendResult, error)
	NextAfter(ctx context.Context, sessionID string, after uint64) (*logstore.Msg, error)
	ReadSession(ctx context.Context, sessionID string, afterStreamSeq uint64, fn func(*logstore.Msg) error) (logstore.Tail, error)
	TailPosition(ctx context.Context, sessionID string) (logstore.Tail, *logstore.UnreadableError, error)
	ReadVerdicts(ctx context.Context, sessionID string, afterStreamSeq uint64, tail logstore.Tail, fn func(m *logstore.Msg, verdict error) error) error
	ClaimEntry(ctx context.Context, sessionID string) (uint64, time.Time, error)
	DropClaim(ctx context.Context, sessionID string, revision uint64) error
	ClaimedSessions(ctx context.Context, fn func(sessionID string)) error
	Erased(ctx context.Context, sessionID string) (bool, error)
	UpdateErasure(ctx context.Context, e logstore.Erasure, rev uint64) (uint64, error)
	FollowErasureRecords(ctx context.Context, ready chan<- struct{}, fn func(logstore.Erasure))
	Locate(sessionID string) (logstore.Location, error)
	MsgAt(ctx context.Context, stream string, seq uint64) (*logstore.Msg, error)
	LastStreamSeq(ctx context.Context, stream string) (uint64, error)
	StreamStatus(ctx context.Context, stream string) (logstore.StreamStatus, error)
	LastHeldSeq(ctx context.Context, stream string) (uint64, error)
	WatchErasures(ctx context.Context, ready chan<- struct{}, fn func(id string)) error
	SecureDelete(ctx context.Context, sessionID string, seqs []uint64, inFlight int, onDelete func() error) error
}

var (
	_ contract = (*memlog.Log)(nil)
	_ contract = (*logstore.Store)(nil)
)

// TestContract runs one transcript of appends, reads, leases, claims and
// erasure records on memlog and on logstore over an embedded NATS server:
// the two must answer alike, field for field (the one place where memlog
// is measured against the log it stands in for beyond the services'
// scripts).
func TestContract(t *testing.T) {
	cfg := logstore.Config{LeaseTTL: time.Minute, ResolveAttempts: 1}
	var got [2]string
	for i, name := range scripttest.Names {
		b := scripttest.Open(t, name, cfg)
		got[i] = transcript(t, b.Log.(contract), followOf(b))
	}
	if got[0] != got[1] {
		t.Fatalf("memlog and logstore answer differently:\n%s", diff(got[0], got[1]))
	}
	for _, want := range []string{
		"again: 1-2 stream 2 duplicate true hash false",
		"other ids: conflict currentSeq 2",
		"past the tail: outcome_unknown",
		"group: [s2 1-1 stream 5 bytes>0 true] [s3 1-2 stream 7 bytes>0 true]",
		"stale group: refused true; s4 tail 0",
		"end at another revision: lease changed",
		"stream last: 7 (<nil>)",
		"at stream 8: none (<nil>)",
		"stream status: last 7 msgs 7 created true (<nil>); last held 7 (<nil>)",
		"watched: [s3] (<nil>)",
		"s3 deleted: stream status: last 7 msgs 5 created true (<nil>); last held 5 (<nil>)",
		"followed: stream 3 sessions.ev.s1 pending 2; stream 4 sessions.ev.s1 pending 1; stream 5 sessions.ev.s2 pending 0",
		"followed s1: stream 1 pending 3; stream 2 pending 2; stream 3 pending 1; stream 4 pending 0",
		"followed on: stream 8 sessions.ev.s2 pending 0",
		"followed in pages: stream 3 sessions.ev.s1 pending 3; stream 4 sessions.ev.s1 pending 2; stream 5 sessions.ev.s2 pending 1; stream 8 sessions.ev.s2 pending 0",
		"s1 tail position: same true verdict <nil> (<nil>)",
		"no such stream: error true, waited false",
		"cancelled: context canceled; closed: follower closed true",
	} {
		if !strings.Contains(got[0], want) {
			t.Errorf("transcript lacks %q:\n%s", want, got[0])
		}
	}
}

// follower is what memlog's and logstore's followers share.
type follower interface {
	Next(ctx context.Context) (*logstore.Msg, error)
	Close()
}

// followOf is the backend's Follow.
func followOf(b *scripttest.Backend) func(context.Context, logstore.FollowSpec) (follower, error) {
	return func(ctx context.Context, spec logstore.FollowSpec) (follower, error) {
		var f follower
		var err error
		if b.Mem != nil {
			f, err = b.Mem.Follow(ctx, spec)
		} else {
			f, err = b.Store.Follow(ctx, spec)
		}
		if err != nil {
			return nil, err
		}
		return f, nil
	}
}

func transcript(t *testing.T, l contract, follow func(context.Context, logstore.FollowSpec) (follower, error)) string {
	ctx := context.Background()
	var out strings.Builder
	say := func(format string, args ...any) { fmt.Fprintf(&out, format+"\n", args...) }
	events := func(id string, from uint64, ids ...string) []schema.Envelope {
		evs := make([]schema.Envelope, len(ids))
		for i, eid := range ids {
			typ := schema.TypeMessageUser
			if from+uint64(i) == 1 {
				typ = schema.TypeSessionCreated
			}
			evs[i] = schema.Envelope{SchemaVersion: schema.Version, SessionID: id, Seq: from + uint64(i), EventID: eid, Type: typ,
				Time: time.Date(2026, 12, 1, 0, 0, i, 0, time.UTC)}
			if typ == schema.TypeMessageUser {
				evs[i].Data = []byte(`{"content":"hi"}`)
			}
		}
		return evs
	}
	result := func(r logstore.AppendResult, err error) string {
		if err != nil {
			se := &schema.Error{}
			if errors.As(err, &se) && se.CurrentSeq != nil {
				return fmt.Sprintf("%s currentSeq %d", schema.CodeOf(err), *se.CurrentSeq)
			}
			return string(schema.CodeOf(err))
		}
		return fmt.Sprintf("%d-%d stream %d duplicate %v hash %v", r.FirstSeq, r.LastSeq, r.StreamSeq, r.Duplicate, r.Hash != "")
	}

	// Appends and their refusals.
	first := logstore.AppendRequest{SessionID: "s1", Events: events("s1", 1, "a", "b")}
	say("first: %s", result(l.Append(ctx, first)))
	say("again: %s", result(l.Append(ctx, first)))
	say("other ids: %s", result(l.Append(ctx, logstore.AppendRequest{SessionID: "s1", Events: events("s1", 1, "x", "y")})))
	say("past the tail: %s", result(l.Append(ctx, logstore.AppendRequest{SessionID: "s1", ExpectedStreamSeq: 99, Events: events("s1", 3, "c")})))
	say("no events: %s", result(l.Append(ctx, logstore.AppendRequest{SessionID: "s1", ExpectedStreamSeq: 2})))
	say("bad id: %s", result(l.Append(ctx, logstore.AppendRequest{SessionID: "a.b", Events: events("a.b", 1, "a")})))

	// The messages an append sends: ids, seq, the chain, the expectation.
	next := logstore.AppendRequest{SessionID: "s1", ExpectedStreamSeq: 2, Events: events("s1", 3, "c", "d")}
	msgs, err := l.Messages(&next)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range msgs {
		say("message %s id=%s seq=%s prev=%v expect=%q", m.Subject, m.Header.Get(logstore.HeaderMsgID), m.Header.Get(logstore.HeaderSeq),
			m.Header.Get(logstore.HeaderPrev) != "", m.Header.Get(logstore.HeaderExpectedSeq))
	}
	say("next: %s", result(l.Append(ctx, next)))

	// Grouped batches: all of it, or none.
	part := func(req logstore.AppendRequest) logstore.GroupPart {
		msgs, err := l.Messages(&req)
		if err != nil {
			t.Fatal(err)
		}
		return logstore.GroupPart{Req: &req, Msgs: msgs}
	}
	res, err := l.AppendGroup(ctx, []logstore.GroupPart{
		part(logstore.AppendRequest{SessionID: "s2", Events: events("s2", 1, "a")}),
		part(logstore.AppendRequest{SessionID: "s3", Events: events("s3", 1, "a", "b")})})
	if err != nil {
		t.Fatal(err)
	}
	var parts []string
	for i, r := range res {
		parts = append(parts, fmt.Sprintf("[s%d %d-%d stream %d bytes>0 %v]", i+2, r.FirstSeq, r.LastSeq, r.StreamSeq, r.Bytes > 0))
	}
	say("group: %s", strings.Join(parts, " "))
	_, err = l.AppendGroup(ctx, []logstore.GroupPart{
		part(logstore.AppendRequest{SessionID: "s4", Events: events("s4", 1, "a")}),
		part(logstore.AppendRequest{SessionID: "s2", Events: events("s2", 1, "z")})})
	s4, _ := l.Tail(ctx, "s4")
	say("stale group: refused %v; s4 tail %d", err != nil && logstore.ClassifySend(err) == logstore.SendRefused, s4.Seq)
	_, err = l.AppendGroup(ctx, []logstore.GroupPart{part(logstore.AppendRequest{SessionID: "s4", Events: events("s4", 1, "a")}),
		part(logstore.AppendRequest{SessionID: "s4", ExpectedStreamSeq: 0, Events: events("s4", 1, "b")})})
	say("same session twice: %s", schema.CodeOf(err))

	// Reads.
	tail, err := l.ReadSession(ctx, "s1", 1, func(m *logstore.Msg) error {
		say("read s1 stream %d id %s", m.StreamSeq, m.EventID())
		return nil
	})
	say("s1 tail: seq %d stream %d id %s hash %v (%v)", tail.Seq, tail.StreamSeq, tail.EventID, tail.Hash != "", err)
	pos, verdict, err := l.TailPosition(ctx, "s1")
	say("s1 tail position: same %v verdict %v (%v)", pos == tail, verdict, err)
	err = l.ReadVerdicts(ctx, "s1", 1, tail, func(m *logstore.Msg, verdict error) error {
		say("walk s1 stream %d id %s verdict %v", m.StreamSeq, m.EventID(), verdict)
		return nil
	})
	say("walk s1 (%v)", err)
	m, _ := l.NextAfter(ctx, "s1", 2)
	say("s1 after stream 2: %d", m.StreamSeq)
	m, _ = l.NextAfter(ctx, "s1", 7)
	say("s1 after stream 7: %v", m != nil)
	loc, _ := l.Locate("s1")
	streamLast, err := l.LastStreamSeq(ctx, loc.Stream)
	say("stream last: %d (%v)", streamLast, err)
	for _, seq := range []uint64{3, 6, streamLast + 1} {
		if m, err := l.MsgAt(ctx, loc.Stream, seq); m != nil {
			say("at stream %d: stream %d %s id %s", seq, m.StreamSeq, m.Subject, m.EventID())
		} else {
			say("at stream %d: none (%v)", seq, err)
		}
	}
	status := func() string {
		st, err := l.StreamStatus(ctx, loc.Stream)
		held, herr := l.LastHeldSeq(ctx, loc.Stream)
		return fmt.Sprintf("stream status: last %d msgs %d created %v (%v); last held %d (%v)", st.LastSeq, st.Msgs, !st.Created.IsZero(), err, held, herr)
	}
	say("%s", status())
	n := 0
	tail, err = l.ReadJudged(ctx, &logstore.Judge{SessionID: "s3"}, func(*logstore.Msg, *schema.Envelope) error { n++; return nil })
	say("s3 judged: %d events, tail seq %d (%v)", n, tail.Seq, err)

	// Leases and claims, with their revisions.
	if err := l.RenewLease(ctx, "s1", "agent-1", time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := l.RenewLease(ctx, "s1", "agent-1", time.Now()); err != nil {
		t.Fatal(err)
	}
	rec, _ := l.LeaseRecord(ctx, "s1")
	say("lease: live %v holder %s revision %d ttl %v", rec.Live(), rec.Lease.Holder, rec.Revision, rec.TTL)
	if err := l.EndLease(ctx, "s1", rec.Revision-1); errors.Is(err, logstore.ErrLeaseChanged) {
		say("end at another revision: lease changed")
	}
	say("end: %v", l.EndLease(ctx, "s1", rec.Revision))
	rec, _ = l.LeaseRecord(ctx, "s1")
	say("after the end: live %v revision %d", rec.Live(), rec.Revision)
	none, _ := l.LeaseRecord(ctx, "s2")
	say("never leased: revision %d; end at 0: %v", none.Revision, l.EndLease(ctx, "s2", 0))
	crev, _, _ := l.ClaimEntry(ctx, "s1")
	say("claim revision %d; drop at another: %v", crev, l.DropClaim(ctx, "s1", crev+1) != nil)
	var claimed []string
	_ = l.ClaimedSessions(ctx, func(id string) { claimed = append(claimed, id) })
	say("claimed: %v", claimed)
	say("drop: %v", l.DropClaim(ctx, "s1", crev))
	c, _ := l.GetClaim(ctx, "s1")
	say("claim after the drop: %v", c != nil)

	// Erasure records: written once, updated at their revision, followed
	// as they are written.
	var mu sync.Mutex
	var seen []string
	fctx, stop := context.WithCancel(ctx)
	defer stop()
	ready := make(chan struct{})
	go l.FollowErasureRecords(fctx, ready, func(e logstore.Erasure) {
		mu.Lock()
		seen = append(seen, fmt.Sprintf("%s %s done=%v", e.SessionID, e.Reason, e.Done))
		mu.Unlock()
	})
	<-ready
	e1, rev, err := l.MarkErased(ctx, logstore.Erasure{SessionID: "s3", By: "op", Reason: "first"})
	e2, _, err2 := l.MarkErased(ctx, logstore.Erasure{SessionID: "s3", By: "op", Reason: "second"})
	erased, _ := l.Erased(ctx, "s3")
	kept, _ := l.Erased(ctx, "s2")
	say("erased: %s then %s (%v %v); s3 %v s2 %v", e1.Reason, e2.Reason, err, err2, erased, kept)
	e1.Done = true
	_, err = l.UpdateErasure(ctx, e1, rev+1)
	say("update at another revision: %v", err != nil)
	_, err = l.UpdateErasure(ctx, e1, rev)
	say("update: %v", err)
	// A follower is given each record at its last revision at least: a
	// record updated before the KV watch's consumer delivered the revision
	// before (the bucket keeps one revision a key, and a consumer reads a
	// message when it delivers it) reaches it once, updated (2 runs in 30
	// on a loaded machine).
	last := func() string {
		mu.Lock()
		defer mu.Unlock()
		if len(seen) == 0 {
			return ""
		}
		return seen[len(seen)-1]
	}
	natstest.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		if l := last(); l != "s3 first done=true" {
			return fmt.Errorf("followed %q last", l)
		}
		return nil
	})
	say("followed, last: %s", last())
	// The erased ids watched: the stored ones, then ready; nil once ctx
	// ends.
	wctx, wstop := context.WithCancel(ctx)
	wready := make(chan struct{})
	var watched []string
	werr := make(chan error, 1)
	go func() {
		werr <- l.WatchErasures(wctx, wready, func(id string) { watched = append(watched, id) })
	}()
	<-wready
	got := slices.Clone(watched)
	wstop()
	say("watched: %v (%v)", got, <-werr)
	// The last messages of the stream deleted: it ends where it did, and
	// holds fewer.
	if err := l.SecureDelete(ctx, "s3", []uint64{6, 7}, 1, nil); err != nil {
		t.Fatal(err)
	}
	say("s3 deleted: %s", status())

	// Followers: a stream's messages after a position in order, deleted
	// ones passed over, each with the count still to deliver after it; a
	// subject's; then a message stored while waiting.
	read := func(f follower, n int, subject bool) string {
		var got []string
		for range n {
			m, err := f.Next(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if subject {
				got = append(got, fmt.Sprintf("stream %d %s pending %d", m.StreamSeq, m.Subject, m.Pending))
			} else {
				got = append(got, fmt.Sprintf("stream %d pending %d", m.StreamSeq, m.Pending))
			}
		}
		return strings.Join(got, "; ")
	}
	all, err := follow(ctx, logstore.FollowSpec{Stream: loc.Stream, StartAfter: 2})
	if err != nil {
		t.Fatal(err)
	}
	say("followed: %s", read(all, 3, true))
	one, err := follow(ctx, logstore.FollowSpec{Stream: loc.Stream, Subject: loc.Subject})
	if err != nil {
		t.Fatal(err)
	}
	say("followed s1: %s", read(one, 4, false))
	one.Close()
	tail2, _ := l.Tail(ctx, "s2")
	say("append s2: %s", result(l.Append(ctx, logstore.AppendRequest{SessionID: "s2", ExpectedStreamSeq: tail2.StreamSeq, Events: events("s2", 2, "b")})))
	say("followed on: %s", read(all, 1, true))
	// Pages of one message, and of fewer bytes than any message (raised
	// to the largest message): the same messages, the same counts.
	paged, err := follow(ctx, logstore.FollowSpec{Stream: loc.Stream, StartAfter: 2, PageEvents: 1, PageBytes: 1})
	if err != nil {
		t.Fatal(err)
	}
	say("followed in pages: %s", read(paged, 4, true))
	paged.Close()
	// A stream that is not there is no fault to wait out.
	waited := false
	_, err = follow(ctx, logstore.FollowSpec{Stream: "NOSUCH", OnUnavailable: func(error) { waited = true }})
	say("no such stream: error %v, waited %v", err != nil, waited)
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, cerr := all.Next(cctx)
	all.Close()
	_, err = all.Next(ctx)
	say("cancelled: %v; closed: follower closed %v", cerr, errors.Is(err, logstore.ErrFollowerClosed))
	return out.String()
}

func diff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	var out strings.Builder
	for i := range max(len(al), len(bl)) {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		mark := "  "
		if x != y {
			mark = "! "
		}
		fmt.Fprintf(&out, "%smemlog:   %s\n%slogstore: %s\n", mark, x, mark, y)
	}
	return out.String()
}
