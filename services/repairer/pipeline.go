package repairer

import "context"

// Pipelined evaluations.
//
// A grouped batch commits the repairs that are ready at once, and it
// takes as long as staging one atomic batch on the stream (tens of ms, an
// fsync on a file stream). An evaluation that held its place among the
// Config.Concurrency running ones while its repair waited for that batch
// left the sessions due behind it queued until the batch answered, and
// the next group could only hold what the held places had ready: a burst
// of expiries was repaired in waves of one group each. So an evaluation
// whose repair waits for its grouped batch on R1 gives its slot to the
// next one (appendPlan calls waiting), and the next group fills while
// this one commits. The lease's end before it still runs in the slot: at
// most Config.Concurrency lease writes are in flight (1,000 at once each
// took 30-60 ms on an idle R3 cluster, queued behind each other).
//
// On R3 an evaluation keeps its slot until its group answers: a batch
// there is staged in memory and replicated (tens of ms, no fsync), and
// the held slots pace the burst into many small groups that replicate
// quickly. Measured on this machine with 1,000 sessions due within
// 140 ms, giving the slot up there doubled the p50 and raised the p99
// (big groups, 1,000 lease writes in flight), while on R1, where each
// group waits for an fsync, keeping it left sessions due 100-500 ms
// waiting for a slot. Up to waitingPerWorker
// times Concurrency evaluations may wait so (each holds its plan and a
// goroutine); past that, one waits in its slot as before.
//
// An evaluation never takes a slot back: what is left after its group
// answered (the state cache, the claim's drop, a re-evaluation after a
// lost check) runs in the waiting place it holds, so no evaluation waits
// for a slot while it holds a session's lock.

// waitingPerWorker bounds the evaluations waiting for grouped batches, per
// slot.
const waitingPerWorker = 4

// evaluateLoop starts an evaluation of each queued session while a slot
// is free, until the service stops.
func (s *Service) evaluateLoop(ctx context.Context) {
	for {
		select {
		case s.slots <- struct{}{}:
		case <-ctx.Done():
			return
		}
		it, ok := s.next()
		if !ok {
			<-s.slots
			return
		}
		p := &place{s: s}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer p.leave()
			s.check(context.WithValue(ctx, placeKey{}, p), it.id, it.why)
		}()
	}
}

// place is where one evaluation runs: a slot, or once its repair waits for
// a grouped batch, a waiting place.
type place struct {
	s       *Service
	waiting bool
}

type placeKey struct{}

// waiting gives the slot of the evaluation running on ctx (if any) to the
// next one, when a waiting place is free.
func waiting(ctx context.Context) {
	p, _ := ctx.Value(placeKey{}).(*place)
	if p == nil || p.waiting {
		return
	}
	select {
	case p.s.waiters <- struct{}{}:
		p.waiting = true
		<-p.s.slots
	default:
	}
}

func (p *place) leave() {
	if p.waiting {
		<-p.s.waiters
	} else {
		<-p.s.slots
	}
}
