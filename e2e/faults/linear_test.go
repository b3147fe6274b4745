package faults

import (
	"fmt"
	"math"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// The linearizability check of each session's appends, with porcupine
// (as etcd's robustness tests do). A session is a register of its last
// seq; an append carries the seq it expects and either commits its n
// events right after it (ok, with the first seq) or is refused because
// the session moved on (conflict). An append whose outcome stayed
// unknown is indeterminate: it may have taken effect at any time after
// it was sent, or never. The repairer's synthetic events are appends
// too, of which the fleet knows only what is stored: they may take
// effect at any time.

// faultLinIn is an append: the seq it expects and how many events.
type faultLinIn struct {
	Expected, N uint64
}

type faultLinKind int

const (
	faultLinOK faultLinKind = iota
	faultLinConflict
	// faultLinRefused: refused without storing anything, for a reason
	// that is not the expectation (paused, closed).
	faultLinRefused
	faultLinUnknown
)

// faultLinOut is what the append was answered.
type faultLinOut struct {
	Kind  faultLinKind
	First uint64
}

var faultAppendModel = (&porcupine.NondeterministicModel{
	Init: func() []any { return []any{uint64(0)} },
	Step: func(state, input, output any) []any {
		s, in, out := state.(uint64), input.(faultLinIn), output.(faultLinOut)
		switch out.Kind {
		case faultLinOK:
			if s == in.Expected && out.First == in.Expected+1 {
				return []any{s + in.N}
			}
		case faultLinConflict:
			if s != in.Expected {
				return []any{s}
			}
		case faultLinRefused:
			return []any{s}
		case faultLinUnknown:
			if s == in.Expected {
				return []any{s + in.N, s}
			}
			return []any{s}
		}
		return nil
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(faultLinIn), output.(faultLinOut)
		kind := map[faultLinKind]string{faultLinOK: "ok", faultLinConflict: "conflict", faultLinRefused: "refused", faultLinUnknown: "unknown"}[out.Kind]
		return fmt.Sprintf("append(expect %d, %d events) -> %s %d", in.Expected, in.N, kind, out.First)
	},
}).ToModel()

// faultLinTimeout bounds porcupine's search per session.
const faultLinTimeout = 10 * time.Second

// faultLinearize checks every fleet session's history of appends and
// counts the verdicts into r.
func faultLinearize(r *faultReport, stored map[string][]faultStored, batches []*faultBatch, sessions map[string]*faultSessionRec) {
	ops := map[string][]porcupine.Operation{}
	sent := map[string]bool{}
	for _, b := range batches {
		for _, id := range b.EventIDs {
			sent[logstore.MsgID(b.Session, id)] = true
		}
		if sessions[b.Session] == nil || len(b.Attempts) == 0 {
			continue
		}
		unknown := false
		for _, a := range b.Attempts {
			unknown = unknown || a.Result == string(schema.CodeOutcomeUnknown) || a.Sends > 1
		}
		op := porcupine.Operation{
			ClientId: b.Agent,
			Input:    faultLinIn{Expected: b.ExpectedSeq, N: uint64(len(b.EventIDs))},
			Call:     b.Attempts[0].Start.UnixNano(),
			Return:   b.Attempts[len(b.Attempts)-1].End.UnixNano(),
		}
		switch {
		case b.Outcome == faultCommitted:
			op.Output = faultLinOut{Kind: faultLinOK, First: b.FirstSeq}
		case b.Outcome == faultUnknown || unknown:
			// A refusal after an unknown send is about that send only:
			// the earlier one may have landed.
			op.Output, op.Return = faultLinOut{Kind: faultLinUnknown}, math.MaxInt64
		case b.Code == string(schema.CodeConflict):
			op.Output = faultLinOut{Kind: faultLinConflict}
		case b.Code != "":
			op.Output = faultLinOut{Kind: faultLinRefused}
		default:
			continue // ended with the run, never sent to a definite end
		}
		ops[b.Session] = append(ops[b.Session], op)
	}
	for sid, evs := range stored {
		if sessions[sid] == nil {
			continue
		}
		// Runs of events the fleet did not send (the repairer's).
		for i := 0; i < len(evs); {
			if sent[logstore.MsgID(sid, evs[i].Env.EventID)] {
				i++
				continue
			}
			j := i
			for j < len(evs) && !sent[logstore.MsgID(sid, evs[j].Env.EventID)] {
				j++
			}
			ops[sid] = append(ops[sid], porcupine.Operation{
				ClientId: -1,
				Input:    faultLinIn{Expected: evs[i].Env.Seq - 1, N: uint64(j - i)},
				Output:   faultLinOut{Kind: faultLinOK, First: evs[i].Env.Seq},
				Call:     0, Return: math.MaxInt64,
			})
			i = j
		}
	}
	for sid, h := range ops {
		switch res, info := porcupine.CheckOperationsVerbose(faultAppendModel, h, faultLinTimeout); res {
		case porcupine.Ok:
			r.Linearizable++
		case porcupine.Illegal:
			r.NotLinearizable++
			longest := 0
			for _, p := range info.PartialLinearizations() {
				for _, l := range p {
					longest = max(longest, len(l))
				}
			}
			r.problem("%s: the history of its %d appends is not linearizable (longest linearizable prefix: %d)", sid, len(h), longest)
		default:
			r.LinUnknown++
		}
	}
}
