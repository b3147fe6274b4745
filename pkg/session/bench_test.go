package session

import (
	"fmt"
	"testing"

	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/pkg/session/sessiontest"
)

// benchSession is a session of turns as agents write them: a user
// message, a step with an attempt, tool calls (some asking approval), an
// assistant message, token stats; now and then a job, a compaction, a
// goal, a pause. Every event of every family the rules know is in it.
func benchSession(b *testing.B, turns int) []schema.Envelope {
	b.Helper()
	lines := []string{"session/created", "goal/updated revision=1"}
	seq, goal := 2, 1
	add := func(format string, args ...any) {
		lines = append(lines, fmt.Sprintf(format, args...))
		seq++
	}
	for i := range turns {
		t := fmt.Sprintf("t%d", i)
		add("turn/started turn=%s", t)
		add("message/user turn=%s", t)
		add("step/started turn=%s step=s1", t)
		add("attempt/started turn=%s attempt=a1", t)
		for c := range 3 {
			call := fmt.Sprintf("c%d-%d", i, c)
			add("tool/requested turn=%s call=%s", t, call)
			if c == 2 {
				add("approval/requested turn=%s approvalId=ap%d toolCallId=%s", t, i, call)
				add("approval/decided turn=%s approvalId=ap%d", t, i)
			}
			add("tool/started turn=%s call=%s", t, call)
			add("tool/result turn=%s call=%s", t, call)
		}
		add("message/assistant turn=%s attempt=a1", t)
		add("stats/tokens ignorable")
		add("step/ended turn=%s step=s1", t)
		if i%10 == 5 {
			add("job/started turn=%s jobId=j%d", t, i)
			add("job/ended turn=%s jobId=j%d", t, i)
		}
		add("turn/ended turn=%s", t)
		if i%10 == 9 {
			through := seq
			add("compaction/started compactionId=k%d throughSeq=%d", i, through)
			add("compaction/ended compactionId=k%d throughSeq=%d", i, through)
			goal++
			add("goal/updated revision=%d", goal)
			add("session/paused")
			add("session/resumed")
			add("context/rewound toSeq=%d", through)
		}
	}
	events := make([]schema.Envelope, len(lines))
	for i, line := range lines {
		events[i] = *sessiontest.Event(b, line)
		events[i].Seq = uint64(i + 1)
	}
	return events
}

// BenchmarkApply folds a 100-turn session (2,000 events) from empty, as
// the projector and every reader of a session do. ns/event is per event.
func BenchmarkApply(b *testing.B) {
	benchFold(b, func(s *State, e *schema.Envelope) error { return s.Apply(e) })
}

// BenchmarkCheckApply checks each event, then applies it: the writer's
// path for a single-event append (checked before the publish, folded
// after the acknowledgement).
func BenchmarkCheckApply(b *testing.B) {
	benchFold(b, func(s *State, e *schema.Envelope) error {
		if err := s.Check(e); err != nil {
			return err
		}
		return s.Apply(e)
	})
}

func benchFold(b *testing.B, fold func(*State, *schema.Envelope) error) {
	events := benchSession(b, 100)
	b.ReportAllocs()
	for b.Loop() {
		s := New("s-1")
		for i := range events {
			if err := fold(s, &events[i]); err != nil {
				b.Fatalf("event %d (%s): %v", i+1, events[i].Type, err)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(events)), "ns/event")
}

// BenchmarkPlanCommit is BenchmarkCheckApply with the event checked once:
// Plan before the publish, Commit after.
func BenchmarkPlanCommit(b *testing.B) {
	benchFold(b, func(s *State, e *schema.Envelope) error {
		p, err := s.Plan(e)
		if err != nil {
			return err
		}
		return s.Commit(p)
	})
}
