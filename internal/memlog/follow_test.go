package memlog_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/memlog"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// fill stores n events of session id in one append.
func fill(t *testing.T, l *memlog.Log, id string, n int) {
	t.Helper()
	evs := make([]schema.Envelope, n)
	for i := range evs {
		evs[i] = schema.Envelope{SchemaVersion: schema.Version, SessionID: id, Seq: uint64(i + 1), EventID: fmt.Sprintf("e%d", i+1),
			Type: schema.TypeMessageUser, Data: []byte(`{"content":"hi"}`), Time: time.Date(2026, 12, 1, 0, 0, i, 0, time.UTC)}
	}
	evs[0].Type, evs[0].Data = schema.TypeSessionCreated, nil
	if _, err := l.Append(context.Background(), logstore.AppendRequest{SessionID: id, Events: evs}); err != nil {
		t.Fatal(err)
	}
}

// A follower takes the stream a page at a time, as logstore's pulls it
// from the server: what a page holds is delivered as it was when the page
// was taken (a message deleted since included, its count of messages
// after it as it was), and the next page is taken when the reader has
// had the last one's messages.
func TestFollowPages(t *testing.T) {
	for _, tc := range []struct {
		spec logstore.FollowSpec
		want string
	}{
		// Pages of one: seq 2 and 4 were taken after their delete.
		{logstore.FollowSpec{PageEvents: 1}, "1 pending 5; 3 pending 2; 5 pending 1; 6 pending 0"},
		// Pages of two: seq 2 came with seq 1, before the delete.
		{logstore.FollowSpec{PageEvents: 2}, "1 pending 5; 2 pending 4; 3 pending 2; 5 pending 1"},
		// One page of all six.
		{logstore.FollowSpec{PageEvents: 10}, "1 pending 5; 2 pending 4; 3 pending 3; 4 pending 2"},
		// Pages of ten events but few bytes: the bytes are raised to the
		// largest message the server takes (1 MiB, and 4 KiB), which the
		// two big messages overfill: the first page ends before seq 4.
		{logstore.FollowSpec{PageEvents: 10, PageBytes: 1}, "1 pending 5; 2 pending 4; 3 pending 3; 5 pending 1"},
	} {
		// A guard: a follower that waits for a message never stored
		// fails the test, not the binary's timeout.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		l, err := memlog.New(logstore.Config{})
		if err != nil {
			t.Fatal(err)
		}
		// Six messages: two events of s1, two big messages on its
		// subject, two events of s2.
		fill(t, l, "s1", 2)
		loc, _ := l.Locate("s1")
		for range 2 {
			l.PutSubject(loc.Stream, loc.Subject, nil, []byte(strings.Repeat("x", 700<<10)))
		}
		fill(t, l, "s2", 2)
		spec := tc.spec
		spec.Stream = loc.Stream
		f, err := l.Follow(ctx, spec)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for i := range 4 {
			m, err := f.Next(ctx)
			if err != nil {
				t.Fatalf("%+v: after %v: %v", tc.spec, got, err)
			}
			got = append(got, fmt.Sprintf("%d pending %d", m.StreamSeq, m.Pending))
			if i == 0 {
				// Seqs 2 and 4 go once the first was delivered.
				if err := l.SecureDelete(ctx, "s1", []uint64{2, 4}, 1, nil); err != nil {
					t.Fatal(err)
				}
			}
		}
		f.Close()
		if g := strings.Join(got, "; "); g != tc.want {
			t.Errorf("%+v: followed %s, want %s", tc.spec, g, tc.want)
		}
	}
}

// While the log is unavailable a follower is refused as JetStream refuses
// one while a stream has no leader; with OnUnavailable, Follow waits for
// the log to be available again, as logstore's does, and says so before
// each wait.
func TestFollowUnavailable(t *testing.T) {
	ctx := context.Background()
	l, err := memlog.New(logstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	fill(t, l, "s1", 2)
	loc, _ := l.Locate("s1")
	l.SetUnavailable(true)
	_, err = l.Follow(ctx, logstore.FollowSpec{Stream: loc.Stream})
	if err == nil || !logstore.Unreachable(err) {
		t.Fatalf("follow while unavailable: %v, want an error logstore.Unreachable names", err)
	}
	waits := make(chan error, 100)
	type followed struct {
		f   *memlog.Follower
		err error
	}
	done := make(chan followed, 1)
	go func() {
		f, err := l.Follow(ctx, logstore.FollowSpec{Stream: loc.Stream, OnUnavailable: func(err error) { waits <- err }})
		done <- followed{f, err}
	}()
	select {
	case werr := <-waits:
		if !logstore.Unreachable(werr) {
			t.Fatalf("OnUnavailable given %v", werr)
		}
	case r := <-done:
		t.Fatalf("Follow returned while the log was unavailable, OnUnavailable not called: %v", r.err)
	}
	l.SetUnavailable(false)
	r := <-done
	if r.err != nil {
		t.Fatalf("follow once available: %v", r.err)
	}
	m, err := r.f.Next(ctx)
	if err != nil || m.StreamSeq != 1 {
		t.Fatalf("first message: %v (%v)", m, err)
	}
	r.f.Close()
	// A follower given up on: its context's error.
	l.SetUnavailable(true)
	cctx, cancel := context.WithCancel(ctx)
	go func() { <-waits; cancel() }()
	if _, err := l.Follow(cctx, logstore.FollowSpec{Stream: loc.Stream, OnUnavailable: func(err error) { waits <- err }}); !errors.Is(err, context.Canceled) {
		t.Fatalf("follow given up: %v, want context.Canceled", err)
	}
}
