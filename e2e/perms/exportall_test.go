package perms

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	natsauth "github.com/sessionlog/sessionlog/deploy/nats"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/internal/otelexport/otlptest"
)

// TestAgentExportsEverySessionItMayRead runs `sessionlog export` of every
// session, as JSON lines and --to otlp, with the credentials of agents of
// the shipped configuration with tenants (TestTenants' deployment): each
// exports the sessions sessions.api.list gives it, those it owns and those
// granted to it, and nothing of another agent's of its tenant or of
// another tenant's, though carol of globex uses the same ids as alice of
// acme. The list is asked as a hostile agent too: a forged
// Nats-Request-Info header and another agent's cursor change nothing. A
// session erased after the export listed it is left out, said and counted;
// so is one erased while the export writes it, of which the export then
// wrote only its first lines, each whole, those it wrote out before it
// learned the erase.
func TestAgentExportsEverySessionItMayRead(t *testing.T) {
	confPath, env, users := tenantsDeployment(t)
	s := startUp(t, env, "--nats-config", confPath)
	alice, bob, carol, agent := users["alice"], users["bob"], users["carol"], users["agent"]
	opC := creds{"operator", deployPasswords["OPERATOR"]}
	conns := map[string]*client{
		"alice": connect(t, s.natsURL, alice, nats.CustomInboxPrefix(natsauth.InboxPrefix("alice"))),
		"bob":   connect(t, s.natsURL, bob, nats.CustomInboxPrefix(natsauth.InboxPrefix("bob"))),
		"carol": connect(t, s.natsURL, carol, nats.CustomInboxPrefix(natsauth.InboxPrefix("carol"))),
		"agent": connect(t, s.natsURL, agent),
	}
	session := func(who, id, created string) {
		t.Helper()
		appendEvents(t, conns[who], id, "",
			ev("c1", "session/created", "", "", created),
			ev("e2", "turn/started", "t1", "", ""),
			ev("e3", "message/user", "t1", "", fmt.Sprintf(`{"content":"%s of %s"}`, id, who)),
			ev("e4", "turn/ended", "t1", "", `{"reason":"completed"}`))
	}
	session("alice", "s-1", `{"title":"alice's"}`)
	session("alice", "s-2", `{"title":"alice's"}`)
	session("bob", "s-bob", `{"title":"bob's"}`)
	session("bob", "s-shared", `{"title":"bob's, granted to alice","grants":["alice"]}`)
	session("carol", "s-1", `{"title":"carol's"}`)
	session("carol", "s-carol", `{"title":"carol's"}`)
	session("agent", "s-default", `{"title":"the default tenant's"}`)
	for _, c := range conns {
		c.NoViolation(t)
	}
	// What each may read, by the stored ids an operator's export names.
	want := map[string][]string{
		"alice": {"_Tacme_s-1", "_Tacme_s-2", "_Tacme_s-shared"},
		"bob":   {"_Tacme_s-bob", "_Tacme_s-shared"},
		"carol": {"_Tglobex_s-1", "_Tglobex_s-carol"},
		"agent": {"s-default"},
	}
	wire := func(stored string) string {
		return strings.TrimPrefix(strings.TrimPrefix(stored, "_Tacme_"), "_Tglobex_")
	}
	// list asks sessions.api.list as who, with m's header, every page.
	list := func(who string, hdr nats.Header, limit int) []string {
		t.Helper()
		var ids []string
		after := ""
		for {
			m := &nats.Msg{Subject: "sessions.api.list", Header: hdr, Data: mustJSON(t, map[string]any{"after": after, "limit": limit})}
			r := askMsg(t, conns[who], m)
			if r.code != "" {
				t.Fatalf("%s's list: %s %s", who, r.code, r.body)
			}
			var page struct {
				Sessions []struct {
					SessionID string `json:"sessionId"`
				} `json:"sessions"`
				Next string `json:"next"`
			}
			if err := json.Unmarshal(r.body, &page); err != nil {
				t.Fatal(err)
			}
			for _, s := range page.Sessions {
				ids = append(ids, s.SessionID)
			}
			if page.Next == "" {
				sort.Strings(ids)
				return ids
			}
			after = page.Next
		}
	}
	wantWire := func(who string) []string {
		var ids []string
		for _, id := range want[who] {
			ids = append(ids, wire(id))
		}
		sort.Strings(ids)
		return ids
	}
	// The projector lists what it has folded: wait for it.
	natstest.CheckFor(t, 30*time.Second, 100*time.Millisecond, func() error {
		for who := range want {
			if got := list(who, nil, 0); !slices.Equal(got, wantWire(who)) {
				return fmt.Errorf("%s's list: %q, want %q", who, got, wantWire(who))
			}
		}
		return nil
	})

	t.Run("the list is the caller's, whatever it sends", func(t *testing.T) {
		// A page at a time (one session a page), and with forged headers.
		if got := list("alice", nil, 1); !slices.Equal(got, wantWire("alice")) {
			t.Errorf("alice's list a page at a time: %q", got)
		}
		for _, forged := range []string{`{"acc":"acme","user":"bob"}`, `{"acc":"SESSIONLOG","user":"operator"}`, `{"acc":"globex","user":"carol"}`} {
			h := nats.Header{}
			h.Set("Nats-Request-Info", forged)
			if got := list("alice", h, 0); !slices.Equal(got, wantWire("alice")) {
				t.Errorf("alice's list with a forged %s: %q", forged, got)
			}
		}
		// bob's cursor, or one naming carol's session, lists alice's only.
		r := ask(t, conns["bob"], "sessions.api.list", map[string]any{"limit": 1})
		var page struct{ Next string }
		if err := json.Unmarshal(r.body, &page); err != nil || page.Next == "" {
			t.Fatalf("bob's first page: %v %s", err, r.body)
		}
		for _, after := range []string{page.Next, "_Tglobex_s-carol", "0._Tglobex_s-carol", "s-bob"} {
			r := ask(t, conns["alice"], "sessions.api.list", map[string]any{"after": after})
			if strings.Contains(string(r.body), "bob") || strings.Contains(string(r.body), "carol") || strings.Contains(string(r.body), "_T") {
				t.Errorf("alice's list after %q: %s", after, r.body)
			}
		}
		for _, c := range conns {
			c.NoViolation(t)
		}
	})

	t.Run("JSON lines of every session it may read", func(t *testing.T) {
		for _, who := range []string{"alice", "bob", "carol", "agent"} {
			var wantLines []string
			for _, id := range want[who] {
				out, err := cliEnv(t, s, opC, nil, "export", "--session", id)
				if err != nil {
					t.Fatal(err)
				}
				wantLines = append(wantLines, strings.Split(strings.TrimSpace(out), "\n")...)
			}
			out, err := cliEnv(t, s, users[who], nil, "export")
			if err != nil {
				t.Fatalf("%s's export: %v", who, err)
			}
			got := strings.Split(strings.TrimSpace(out), "\n")
			sort.Strings(got)
			sort.Strings(wantLines)
			if !slices.Equal(got, wantLines) {
				t.Errorf("%s's export of every session:\n%s\nwant the operator's export of %q:\n%s", who, strings.Join(got, "\n"), want[who], strings.Join(wantLines, "\n"))
			}
		}
	})

	t.Run("OTLP of every session it may read", func(t *testing.T) {
		rcv := otlptest.NewReceiver(t)
		for _, who := range []string{"alice", "carol"} {
			if _, err := cliEnv(t, s, users[who], nil, "export", "--to", "otlp", "--endpoint", rcv.URL); err != nil {
				t.Fatalf("%s's export --to otlp: %v", who, err)
			}
			if got := spanSessions(rcv); !slices.Equal(got, want[who]) {
				t.Errorf("%s's export --to otlp sent spans of %q, want %q", who, got, want[who])
			}
		}
		// One session, named.
		if _, err := cliEnv(t, s, alice, nil, "export", "--to", "otlp", "--endpoint", rcv.URL, "--session", "s-shared"); err != nil {
			t.Fatal(err)
		}
		for _, sp := range rcv.Take() {
			for _, a := range sp.Attributes {
				if a.Key == "session.id" && a.Value.GetStringValue() != "_Tacme_s-shared" {
					t.Errorf("alice's export --to otlp --session s-shared sent a span of %s", a.Value.GetStringValue())
				}
			}
		}
		// Another agent's session, another tenant's: refused, nothing sent.
		for _, tc := range []struct {
			who, id, says string
		}{{"bob", "s-1", "forbidden"}, {"carol", "s-2", "not_found"}} {
			_, err := cliEnv(t, s, users[tc.who], nil, "export", "--to", "otlp", "--endpoint", rcv.URL, "--session", tc.id)
			if err == nil || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("%s's export --to otlp of %s: %v, want %s", tc.who, tc.id, err, tc.says)
			}
		}
		if n := rcv.Count(); n != 0 {
			t.Errorf("refused exports sent %d spans", n)
		}
	})

	t.Run("a session erased after the list is left out", func(t *testing.T) {
		// s-gone, then s-big, the most recently active: alice's export
		// lists both and reads s-big first. Its lines are more than the
		// export buffers and a pipe holds, so with stdout not read the
		// export waits on its writes with s-gone not yet read; the
		// operator erases s-gone then.
		session("alice", "s-gone", `{"title":"alice's, erased"}`)
		bigSession(t, conns["alice"], "s-big", bigEvents, bigSize)
		listed := append(wantWire("alice"), "s-big", "s-gone")
		sort.Strings(listed)
		natstest.CheckFor(t, 30*time.Second, 100*time.Millisecond, func() error {
			if got := list("alice", nil, 0); !slices.Equal(got, listed) {
				return fmt.Errorf("alice's list: %q, want %q", got, listed)
			}
			return nil
		})
		written, stderr, err := exportErasing(t, s, alice, opC, "_Tacme_s-gone", nil, firstByte(t), nil, nil)
		if err != nil {
			t.Fatalf("alice's export with s-gone erased after the list: %v\n%s", err, stderr)
		}
		lines := strings.Split(strings.TrimSpace(written), "\n")
		bigLines := 0
		for _, l := range lines {
			if strings.Contains(l, "s-gone") {
				t.Fatalf("alice's export wrote a line of s-gone: %.300s", l)
			}
			if strings.Contains(l, `"sessionId":"_Tacme_s-big"`) {
				bigLines++
			}
		}
		for _, w := range []string{"session s-gone not exported: erased since it was listed", "(1 sessions erased since they were listed left out)"} {
			if !strings.Contains(stderr, w) {
				t.Errorf("alice's export does not say %q:\n%s", w, stderr)
			}
		}
		// s-big whole, and each session she may still read.
		if bigLines != bigEvents || len(lines) != bigEvents+4*len(want["alice"]) {
			t.Errorf("alice's export: %d lines, %d of s-big; want %d of s-big and 4 of each of %q\n%s", len(lines), bigLines, bigEvents, want["alice"], stderr)
		}
	})
	t.Run("OTLP: a session erased after the list is left out", func(t *testing.T) {
		// s-gone2, then s-first, the most recently active: alice's export
		// --to otlp lists both and sends s-first's spans first, which the
		// collector holds while the operator erases s-gone2.
		session("alice", "s-gone2", `{"title":"alice's, erased"}`)
		session("alice", "s-first", `{"title":"alice's, sent first"}`)
		natstest.CheckFor(t, 30*time.Second, 100*time.Millisecond, func() error {
			if got := list("alice", nil, 0); !slices.Contains(got, "s-gone2") || !slices.Contains(got, "s-first") {
				return fmt.Errorf("alice's list: %q", got)
			}
			return nil
		})
		rcv := otlptest.NewReceiver(t)
		held, release := rcv.Hold(t)
		_, stderr, err := exportErasing(t, s, alice, opC, "_Tacme_s-gone2", []string{"--to", "otlp", "--endpoint", rcv.URL}, func(io.Reader) []byte {
			<-held
			return nil
		}, nil, release)
		if err != nil {
			t.Fatalf("alice's export --to otlp with s-gone2 erased after the list: %v\n%s", err, stderr)
		}
		for _, w := range []string{"session s-gone2 not exported: erased since it was listed", "(1 sessions erased since they were listed left out)"} {
			if !strings.Contains(stderr, w) {
				t.Errorf("alice's export --to otlp does not say %q:\n%s", w, stderr)
			}
		}
		if got := spanSessions(rcv); !slices.Contains(got, "_Tacme_s-first") || slices.Contains(got, "_Tacme_s-gone2") {
			t.Errorf("alice's export --to otlp sent spans of %q", got)
		}
	})
	t.Run("a session erased during its export is left out", func(t *testing.T) {
		// s-big2, the most recently active, is read first. Its lines are
		// more than the export buffers and a pipe holds, so with stdout
		// not read the export waits on its writes having read a part of
		// it for the second time; the operator erases it then.
		bigSession(t, conns["alice"], "s-big2", bigEvents, bigSize)
		natstest.CheckFor(t, 30*time.Second, 100*time.Millisecond, func() error {
			if got := list("alice", nil, 0); !slices.Contains(got, "s-big2") {
				return fmt.Errorf("alice's list holds no s-big2: %q", got)
			}
			return nil
		})
		written, stderr, err := exportErasing(t, s, alice, opC, "_Tacme_s-big2", nil, firstByte(t), nil, nil)
		rest := leftOutByErase(t, "alice", "s-big2", "_Tacme_s-big2", false, bigEvents, written, stderr, err)
		// Then each session she may still read, whole.
		if len(rest) != bigEvents+4*(len(want["alice"])+1) {
			t.Errorf("alice's export after s-big2: %d lines, want %d of s-big and 4 of s-first and of each of %q\n%s", len(rest), bigEvents, want["alice"], stderr)
		}
	})
	t.Run("OTLP: a session erased during its export is left out", func(t *testing.T) {
		// s-turns, the most recently active, is sent first: the
		// collector holds its first request while the operator erases
		// it.
		turnsSession(t, conns["alice"], "s-turns", erasedTurns)
		natstest.CheckFor(t, 30*time.Second, 100*time.Millisecond, func() error {
			if got := list("alice", nil, 0); !slices.Contains(got, "s-turns") {
				return fmt.Errorf("alice's list holds no s-turns: %q", got)
			}
			return nil
		})
		rcv := otlptest.NewReceiver(t)
		held, release := rcv.Hold(t)
		_, stderr, err := exportErasing(t, s, alice, opC, "_Tacme_s-turns", []string{"--to", "otlp", "--endpoint", rcv.URL}, func(io.Reader) []byte {
			<-held
			return nil
		}, func() {
			erasureRecorded(t, s, opC, "_Tacme_s-turns")
			release()
		}, nil)
		// Then the spans of the sessions she may still read.
		after := erasedOTLP(t, "alice", "s-turns", "_Tacme_s-turns", false, rcv, stderr, err)
		slices.Sort(after)
		if after = slices.Compact(after); !slices.Equal(after, []string{"_Tacme_s-1", "_Tacme_s-2", "_Tacme_s-first", "_Tacme_s-shared"}) {
			t.Errorf("after s-turns, alice's export --to otlp sent spans of %q", after)
		}
	})
}

// TestOperatorExportErasedDuringItsSecondRead erases a session while the
// operator's export of it, as JSON lines and --to otlp, waits having read
// it once whole and a part of it a second time (on a full stdout pipe;
// on the collector, which holds its first request of spans): the session
// is left out as of an agent's export (leftOutByErase), and with --to
// otlp no span of it is sent after the spans of that first request.
func TestOperatorExportErasedDuringItsSecondRead(t *testing.T) {
	confPath, env, users := tenantsDeployment(t)
	s := startUp(t, env, "--nats-config", confPath)
	op := creds{"operator", deployPasswords["OPERATOR"]}
	alice := connect(t, s.natsURL, users["alice"], nats.CustomInboxPrefix(natsauth.InboxPrefix("alice")))
	t.Run("JSON lines", func(t *testing.T) {
		// Some 16 MB of lines: more than a read of the store fetches
		// ahead (8 MiB: the read reaches the erase's deletions, where it
		// would wait for the store's stall bound were it not ended when
		// the erasure record is written), the export buffers (1 MiB) and
		// a pipe holds (64 KiB); few events, which the erase deletes one
		// at a time.
		const events, id = 250, "_Tacme_s-big"
		bigSession(t, alice, "s-big", events, 64000)
		written, stderr, err := exportErasing(t, s, op, op, id, []string{"--session", id}, firstByte(t), nil, nil)
		if rest := leftOutByErase(t, "the operator", id, id, true, events, written, stderr, err); len(rest) != 0 {
			t.Errorf("the operator's export of %s alone wrote %d lines after it", id, len(rest))
		}
	})
	t.Run("OTLP", func(t *testing.T) {
		// More turns than a request of spans holds (otelexport's
		// MaxExportSpans, 512), a span each.
		const id = "_Tacme_s-turns"
		turnsSession(t, alice, "s-turns", erasedTurns)
		rcv := otlptest.NewReceiver(t)
		held, release := rcv.Hold(t)
		_, stderr, err := exportErasing(t, s, op, op, id, []string{"--session", id, "--to", "otlp", "--endpoint", rcv.URL}, func(io.Reader) []byte {
			<-held
			return nil
		}, func() {
			// Let the collector answer once the erase has begun: the
			// export's own requests time out before an erase of some
			// thousand events ends.
			erasureRecorded(t, s, op, id)
			release()
		}, nil)
		if after := erasedOTLP(t, "the operator", id, id, true, rcv, stderr, err); len(after) != 0 || !strings.Contains(stderr, "exported 0 sessions: 0 turns, 0 spans") {
			t.Errorf("the operator's export --to otlp of %s alone sent %d spans after the held request\n%s", id, len(after), stderr)
		}
	})
}

// endedByErase checks how an export during which session named was
// erased ended: with no error when it exported the sessions it listed,
// and, when the session was named (byName: --session), failing with
// the session named as not exported.
func endedByErase(t *testing.T, export, named string, byName bool, stderr string, err error) {
	t.Helper()
	switch {
	case !byName && err != nil:
		t.Fatalf("%s of %s, erased during it: %v\n%s", export, named, err, stderr)
	case byName && (err == nil || !strings.Contains(stderr, "sessions named not exported (erased during the export): "+named)):
		t.Fatalf("%s of %s alone, erased during it: %v, want it to fail naming it\n%s", export, named, err, stderr)
	}
}

// leftOutByErase checks how who's export of a session of events events,
// erased during the export's second read of it, ended (endedByErase),
// saying that it left the session (named, as who names it) out, erased
// during the export, after how many of its lines went out before the
// export learned it; what it wrote (written) is those lines first, the
// session's first, each whole, stored as stored. It returns the lines
// written after them, none of the session's.
func leftOutByErase(t *testing.T, who, named, stored string, byName bool, events int, written, stderr string, err error) []string {
	t.Helper()
	endedByErase(t, who+"'s export", named, byName, stderr, err)
	if !strings.HasSuffix(written, "\n") {
		t.Fatalf("%s's export ends inside a line: %q", who, written[max(0, len(written)-200):])
	}
	lines := strings.Split(strings.TrimSuffix(written, "\n"), "\n")
	n := 0
	for n < len(lines) && strings.Contains(lines[n], `"sessionId":"`+stored+`"`) {
		n++
	}
	if n == 0 || n >= events {
		t.Fatalf("%s's export wrote %d lines of %s first", who, n, named)
	}
	for _, w := range []string{fmt.Sprintf("session %s not exported: erased during the export (%d of its lines went out before the export learned it)", named, n), "(1 sessions erased during the export left out)"} {
		if !strings.Contains(stderr, w) {
			t.Errorf("%s's export does not say %q:\n%s", who, w, stderr)
		}
	}
	for i, l := range lines[:n] {
		var e struct {
			SessionID string `json:"sessionId"`
			Seq       int    `json:"seq"`
		}
		if err := json.Unmarshal([]byte(l), &e); err != nil || e.SessionID != stored || e.Seq != i+1 {
			t.Fatalf("line %d of %s's export: %v %.200s", i+1, who, err, l)
		}
	}
	rest := lines[n:]
	for _, l := range rest {
		if strings.Contains(l, `"sessionId":"`+stored+`"`) {
			t.Fatalf("%s's export wrote a line of %s after its first %d: %.200s", who, named, n, l)
		}
	}
	return rest
}

// erasedTurns is the turns of the sessions erased during an export --to
// otlp: more than a request of spans holds (otelexport's MaxExportSpans,
// 512), a span each.
const erasedTurns = 520

// turnsSession appends a session of n turns, each its turn/started and
// turn/ended.
func turnsSession(t *testing.T, c *client, id string, n int) {
	t.Helper()
	batch := []map[string]any{ev("c1", "session/created", "", "", `{"title":"turns"}`)}
	for i := range n {
		tid := fmt.Sprintf("t%d", i)
		batch = append(batch,
			ev("s"+tid, "turn/started", tid, "", ""),
			ev("e"+tid, "turn/ended", tid, "", `{"reason":"completed"}`))
		if len(batch) >= 450 || i == n-1 {
			appendEvents(t, c, id, "", batch...)
			batch = batch[:0]
		}
	}
	c.NoViolation(t)
}

// erasedOTLP checks how who's export --to otlp, during which session
// stored (named as who names it) was erased while the collector held the
// export's first request, of 512 of its spans, ended (endedByErase),
// saying it left the session out after those 512 spans, and with no
// request after that one holding a span of it. It returns the session.id
// of the spans received after the first request.
func erasedOTLP(t *testing.T, who, named, stored string, byName bool, rcv *otlptest.Receiver, stderr string, err error) []string {
	t.Helper()
	endedByErase(t, who+"'s export --to otlp", named, byName, stderr, err)
	for _, w := range []string{fmt.Sprintf("session %s not exported: erased during the export (512 of its spans went out before the export learned it)", named), "(1 sessions erased during the export left out)"} {
		if !strings.Contains(stderr, w) {
			t.Errorf("%s's export --to otlp does not say %q:\n%s", who, w, stderr)
		}
	}
	got := rcv.Take()
	if sizes := rcv.Requests(); len(sizes) == 0 || sizes[0] != 512 {
		t.Fatalf("%s's export --to otlp sent requests of %v spans, want the held one of 512 first", who, sizes)
	}
	var after []string
	for i, sp := range got {
		for _, a := range sp.Attributes {
			if a.Key != "session.id" {
				continue
			}
			id := a.Value.GetStringValue()
			if i >= 512 {
				after = append(after, id)
			}
			if (i < 512) != (id == stored) {
				t.Fatalf("span %d that %s's export --to otlp sent is of %s", i, who, id)
			}
		}
	}
	return after
}

// The big sessions of TestAgentExportsEverySessionItMayRead: some 4.8 MB
// of lines, more than the export's buffer (1 MiB) and a pipe (64 KiB)
// hold, in pages of some 60 events.
const bigEvents, bigSize = 300, 16000

// bigSession appends a session of n events, every one after the first a
// user message of size bytes, at most 500 and some 512 KiB to an append.
func bigSession(t *testing.T, c *client, id string, n, size int) {
	t.Helper()
	pad := strings.Repeat("x", size)
	batch := make([]map[string]any, 0, max(1, min(500, 512<<10/size)))
	for i := range n {
		if i == 0 {
			batch = append(batch, ev("c1", "session/created", "", "", `{"title":"big"}`))
		} else {
			batch = append(batch, ev(fmt.Sprintf("e%d", i), "message/user", "", "", fmt.Sprintf(`{"content":"%s"}`, pad)))
		}
		if len(batch) == cap(batch) || i == n-1 {
			appendEvents(t, c, id, "", batch...)
			batch = batch[:0]
		}
	}
	c.NoViolation(t)
}

// exportErasing runs `sessionlog export` of every session as c, with
// args, and has the operator op erase session id once listed has
// returned, which waits (reading from the export's stdout, whose bytes it
// returns) for a sign that the export has listed; during, when set, is
// called while the erase runs, once it has begun, and resume, when set,
// after the erase. It returns what the export wrote and said, and how it
// ended.
func exportErasing(t *testing.T, s *stack, c, op creds, id string, args []string, listed func(stdout io.Reader) []byte, during, resume func()) (written, stderr string, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	full := append([]string{"export", "--nats-url", s.natsURL, "--nats-user", c.user, "--nats-password", c.password}, args...)
	cmd := exec.CommandContext(ctx, sessionlogBin(t), full...)
	cmd.Env = environ()
	var errb bytes.Buffer
	cmd.Stderr = &errb
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	first := listed(out)
	type erased struct {
		out string
		err error
	}
	done := make(chan erased, 1)
	go func() {
		got, err := cli(t, s, op, "erase", id, "--reason", "perms test")
		done <- erased{got, err}
	}()
	if during != nil {
		during()
	}
	if e := <-done; e.err != nil || !strings.Contains(e.out, "erased "+id) {
		t.Fatalf("erase %s: %v\n%s", id, e.err, e.out)
	}
	if resume != nil {
		resume()
	}
	rest, err := io.ReadAll(out)
	if err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	return string(first) + string(rest), errb.String(), err
}

// erasureRecorded waits for session id's erasure record, read as the
// operator op.
func erasureRecorded(t *testing.T, s *stack, op creds, id string) {
	t.Helper()
	nc := connect(t, s.natsURL, op, nats.CustomInboxPrefix(natsauth.OperatorInboxPrefix))
	js, err := jetstream.New(nc.Conn)
	if err != nil {
		t.Fatal(err)
	}
	natstest.CheckFor(t, 30*time.Second, 50*time.Millisecond, func() error {
		kv, err := js.KeyValue(context.Background(), "SESSION_ERASED")
		if err != nil {
			return err
		}
		_, err = kv.Get(context.Background(), id)
		return err
	})
}

// spanSessions is the session.id of the spans rcv received since it was
// last asked, each once, sorted.
func spanSessions(rcv *otlptest.Receiver) []string {
	var got []string
	for _, sp := range rcv.Take() {
		for _, a := range sp.Attributes {
			if a.Key == "session.id" && !slices.Contains(got, a.Value.GetStringValue()) {
				got = append(got, a.Value.GetStringValue())
			}
		}
	}
	sort.Strings(got)
	return got
}

// firstByte is exportErasing's listed of an export of JSON lines: its
// first byte, which it writes after the list.
func firstByte(t *testing.T) func(io.Reader) []byte {
	return func(out io.Reader) []byte {
		first := make([]byte, 1)
		if _, err := io.ReadFull(out, first); err != nil {
			t.Fatalf("the export wrote nothing: %v", err)
		}
		return first
	}
}
