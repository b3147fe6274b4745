package agentlog

import (
	"math/rand/v2"
	"testing"

	"github.com/sessionlog/sessionlog/pkg/session"
)

// TestRewindRangesAreTheContext: the ranges of the rewinds that stand
// (standing: at most one a rewind) leave out
// exactly the seqs the model's context (session.Context, followed in
// memory) no longer holds, for random runs of messages, compactions and
// rewinds, to seqs before, inside and after what earlier rewinds
// abandoned.
func TestRewindRangesAreTheContext(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for run := range 2000 {
		c := session.NewContext()
		var rewinds []SeqRange
		var visible []uint64 // the seqs Add gave the context
		n := 2 + r.IntN(60)
		for seq := uint64(1); seq <= uint64(n); seq++ {
			if seq > 2 && r.IntN(4) == 0 {
				to := uint64(r.IntN(int(seq) + 2)) // a toSeq at or after seq changes nothing
				c.Rewind(seq, to)
				if to < seq {
					rewinds = append(rewinds, SeqRange{After: to, Before: seq})
				}
				continue
			}
			c.Add(seq) // a message, or a compaction (added as it is when not compacting)
			visible = append(visible, seq)
		}
		ranges := standing(rewinds)
		x := &Export{abandoned: ranges}
		in := map[uint64]bool{}
		for _, s := range c.Seqs() {
			in[s] = true
		}
		for _, s := range visible {
			if got := !x.Abandoned(s); got != in[s] {
				t.Fatalf("run %d: seq %d kept %v by the ranges %v, %v by the context %v", run, s, got, ranges, in[s], c.Seqs())
			}
		}
		if len(ranges) > n {
			t.Fatalf("run %d: %d ranges", run, len(ranges))
		}
	}
}

// TestOpenCallsListTheOpenInOrder: OpenCalls lists the calls without a
// result in the order of their requests, each with its number among all
// the requests, and forgets an answered one (also across compactions of
// its list).
func TestOpenCallsListTheOpenInOrder(t *testing.T) {
	var c OpenCalls
	for i := range 1000 {
		c.Request(string(rune('a'+i%26)) + string(rune('0'+i/26%10)) + string(rune('0'+i/260)))
	}
	c.Request("a00") // again while open: counted, not listed twice
	for i := range 1000 {
		if i%10 != 3 {
			c.Answer(string(rune('a'+i%26)) + string(rune('0'+i/26%10)) + string(rune('0'+i/260)))
		}
	}
	c.Request("zz") // number 1001
	got := c.List()
	if len(got) != 101 {
		t.Fatalf("%d open, want 101", len(got))
	}
	for k, o := range got[:100] {
		if want := 10*k + 3; o.N != want {
			t.Fatalf("open %d: number %d, want %d", k, o.N, want)
		}
	}
	if last := got[100]; last.ID != "zz" || last.N != 1001 || !c.IsOpen("zz") || c.IsOpen("a00") {
		t.Fatalf("last %+v", last)
	}
	c.Answer("zz")
	c.Request("zz") // requested again after its result: open again, with its new number
	if got := c.List(); got[len(got)-1] != (OpenCall{ID: "zz", N: 1002}) {
		t.Fatalf("re-requested: %+v", got[len(got)-1])
	}
}
