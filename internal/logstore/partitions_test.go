package logstore_test

import (
	"context"
	"errors"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
)

func TestLayoutLocate(t *testing.T) {
	one, _ := logstore.NewLayout(1)
	if loc, _ := one.Locate("s-1"); loc != (logstore.Location{Stream: "SESSIONS", Subject: "sessions.ev.s-1"}) {
		t.Fatalf("P=1 Locate = %+v", loc)
	}
	three, _ := logstore.NewLayout(3)
	if got := three.Streams(); !slices.Equal(got, []string{"SESSIONS-0", "SESSIONS-1", "SESSIONS-2"}) {
		t.Fatalf("P=3 Streams = %v", got)
	}
	for _, id := range []string{"a", "b", "s-1", "session_42"} {
		h := fnv.New32a()
		h.Write([]byte(id))
		p := int(h.Sum32() % 3)
		want := logstore.Location{Stream: "SESSIONS-" + strconv.Itoa(p), Subject: "sessions." + strconv.Itoa(p) + ".ev." + id, Partition: p}
		if loc, err := three.Locate(id); err != nil || loc != want {
			t.Errorf("P=3 Locate(%q) = %+v, %v, want %+v", id, loc, err, want)
		}
		if got, ok := logstore.SessionFromSubject(want.Subject); !ok || got != id {
			t.Errorf("SessionFromSubject(%q) = %q, %v", want.Subject, got, ok)
		}
	}
	for _, bad := range []string{"sessions.x.ev.a", "sessions..ev.a", "sessions.1.ev.a.b", "sessions.live.a"} {
		if id, ok := logstore.SessionFromSubject(bad); ok {
			t.Errorf("SessionFromSubject(%q) = %q", bad, id)
		}
	}
	for _, p := range []int{0, -1, logstore.MaxPartitions + 1} {
		if _, err := logstore.NewLayout(p); err == nil {
			t.Errorf("NewLayout(%d) accepted", p)
		}
	}
}

func TestPartitionsRecordedAndRefused(t *testing.T) {
	for _, tc := range []struct {
		name        string
		made, asked int
	}{{"P1ThenP3", 1, 3}, {"P3ThenP1", 3, 1}, {"P3ThenP2", 3, 2}} {
		t.Run(tc.name, func(t *testing.T) {
			srv := natstest.RunServer(t)
			nc := natstest.Connect(t, srv)
			ctx := context.Background()
			st := open(t, nc, logstore.Config{Partitions: tc.made})
			if p, ok, err := st.RecordedPartitions(ctx); err != nil || !ok || p != tc.made {
				t.Fatalf("recorded = %d, %v, %v", p, ok, err)
			}
			before := natstest.StreamNames(t, nc)
			_, err := logstore.Open(ctx, nc, logstore.Config{Partitions: tc.asked})
			var pe *logstore.PartitionsError
			if !errors.As(err, &pe) || pe.Recorded != tc.made || pe.Asked != tc.asked {
				t.Fatalf("Open with %d on a store of %d = %v, want PartitionsError", tc.asked, tc.made, err)
			}
			if msg := err.Error(); !containsAll(msg, strconv.Itoa(tc.made), strconv.Itoa(tc.asked)) {
				t.Fatalf("message %q names not both counts", msg)
			}
			if after := natstest.StreamNames(t, nc); !slices.Equal(before, after) {
				t.Fatalf("refused Open created streams: %v -> %v", before, after)
			}
			// A service that does not provision is refused the same way.
			if _, err := logstore.Open(ctx, nc, logstore.Config{Partitions: tc.asked, NoProvision: true}); !errors.As(err, &pe) {
				t.Fatalf("NoProvision Open = %v", err)
			}
			// The right count opens; no count (the operator tools) takes the
			// recorded one.
			open(t, nc, logstore.Config{Partitions: tc.made})
			if got := open(t, nc, logstore.Config{NoProvision: true}).Layout().Partitions(); got != tc.made {
				t.Fatalf("Open without a count has %d partitions, want %d", got, tc.made)
			}
		})
	}
}

// A store provisioned before the count was recorded holds SESSIONS: one
// partition.
func TestPartitionsOfAnUnrecordedStore(t *testing.T) {
	srv := natstest.RunServer(t)
	nc := natstest.Connect(t, srv)
	js := natstest.JetStream(t, nc)
	ctx := context.Background()
	l, _ := logstore.NewLayout(1)
	if _, err := js.CreateStream(ctx, logstore.StreamConfig(logstore.Config{}, l, logstore.StreamName)); err != nil {
		t.Fatal(err)
	}
	before := natstest.StreamNames(t, nc)
	var pe *logstore.PartitionsError
	if _, err := logstore.Open(ctx, nc, logstore.Config{Partitions: 3}); !errors.As(err, &pe) || pe.Recorded != 1 {
		t.Fatalf("Open P=3 on an unrecorded SESSIONS store = %v", err)
	}
	if after := natstest.StreamNames(t, nc); !slices.Equal(before, after) {
		t.Fatalf("refused Open created streams: %v -> %v", before, after)
	}
	open(t, nc, logstore.Config{})
}

func TestAppendAcrossPartitions(t *testing.T) {
	srv := natstest.RunServer(t)
	nc := natstest.Connect(t, srv)
	st := open(t, nc, logstore.Config{Partitions: 3})
	ctx := context.Background()
	seen := map[string]bool{}
	for i := range 12 {
		sid := "p" + strconv.Itoa(i)
		if _, err := st.Append(ctx, logstore.AppendRequest{SessionID: sid, Events: events(sid, 1, 2, "e")}); err != nil {
			t.Fatal(err)
		}
		loc, _ := st.Locate(sid)
		seen[loc.Stream] = true
		tail, err := st.Tail(ctx, sid)
		if err != nil || tail.Seq != 2 {
			t.Fatalf("tail of %s = %+v, %v", sid, tail, err)
		}
		m, err := st.MsgAt(ctx, loc.Stream, tail.StreamSeq)
		if err != nil || m == nil || m.Subject != loc.Subject {
			t.Fatalf("stored at %s = %+v, %v", loc.Stream, m, err)
		}
	}
	if len(seen) != 3 {
		t.Fatalf("12 sessions landed in streams %v, want all 3", seen)
	}
	list, err := st.ListSessions(ctx)
	if err != nil || len(list) != 12 {
		t.Fatalf("ListSessions = %d, %v", len(list), err)
	}
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
