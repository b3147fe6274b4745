package e2e

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/pkg/client"
	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/services/eraser"
)

// The seal of DESIGN.md section 14 (ADR 009) on every layout, R3
// included: four agents append to a session, each through its own
// connection, while it is erased. Every append acknowledged is one of the
// events the audit counts (one seq each, none past the audit's last), none
// lands after the job ends, each agent is at last answered erased, and
// nothing of the session is left.
func TestEraseSealsOnEveryLayout(t *testing.T) {
	natstest.ForEachLayout(t, func(t *testing.T, l natstest.Layout) {
		e := fkStartLayout(t, l)
		er, err := eraser.New(eraser.Config{Store: e.store, Conn: e.nc, SweepInterval: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- er.Run(ctx) }()
		t.Cleanup(func() { cancel(); <-done })
		natstest.CheckFor(t, 10*time.Second, 10*time.Millisecond, er.Ready)

		const id = "s-seal"
		if _, err := e.cl.Append(ctx, client.AppendRequest{SessionID: id, ExpectedSeq: client.Seq(0),
			Events: []schema.Envelope{{Type: schema.TypeSessionCreated}}}); err != nil {
			t.Fatal(err)
		}
		var (
			mu     sync.Mutex
			acked  = map[uint64]string{1: "created"}
			final  = map[int]error{}
			agents sync.WaitGroup
			enough = make(chan struct{})
			once   sync.Once
		)
		// The agents give up a minute after the erase is asked (a last
		// error other than erased fails the test).
		actx, acancel := context.WithCancel(ctx)
		defer acancel()
		for a := range 4 {
			cl := client.New(e.deploy.Connect())
			agents.Go(func() {
				var last error
				for n := 0; ; n++ {
					if actx.Err() != nil {
						mu.Lock()
						final[a] = fmt.Errorf("still appending, the last error: %w", last)
						mu.Unlock()
						return
					}
					text := fmt.Sprintf("agent %d says %d", a, n)
					res, err := cl.Append(actx, client.AppendRequest{SessionID: id,
						Events: []schema.Envelope{{Type: schema.TypeMessageUser, Data: []byte(`{"content":"` + text + `"}`)}}})
					if err == nil {
						mu.Lock()
						if prev, ok := acked[res.LastSeq]; ok {
							t.Errorf("seq %d acknowledged twice: %q and %q", res.LastSeq, prev, text)
						}
						acked[res.LastSeq] = text
						if len(acked) >= 60 {
							once.Do(func() { close(enough) })
						}
						mu.Unlock()
						continue
					}
					last = err
					switch client.CodeOf(err) {
					case schema.CodeConflict, schema.CodeNotCommitted, schema.CodeOutcomeUnknown:
						continue // another agent's append first, or the cluster busy: again
					}
					mu.Lock()
					final[a] = err
					mu.Unlock()
					once.Do(func() { close(enough) })
					return
				}
			})
		}
		<-enough
		// An erase that chases the appends never ends: bounded here.
		ectx, ecancel := context.WithTimeout(ctx, 3*time.Minute)
		defer ecancel()
		got, err := er.Erase(ectx, eraser.EraseRequest{SessionID: id, Reason: "seal", By: "test"})
		time.AfterFunc(time.Minute, acancel)
		agents.Wait()
		if err != nil {
			t.Fatal(err)
		}
		for a := range 4 {
			if client.CodeOf(final[a]) != schema.CodeErased {
				t.Errorf("agent %d stopped with %v, want erased", a, final[a])
			}
		}
		recs, _, err := e.store.AuditRecords(ctx, 0, 10)
		if err != nil || len(recs) != 1 {
			t.Fatalf("audit records %+v, %v", recs, err)
		}
		rec := recs[0]
		for seq := range acked {
			if seq > rec.LastSeq {
				t.Errorf("seq %d (%q) acknowledged past the audit's last seq %d", seq, acked[seq], rec.LastSeq)
			}
		}
		if rec.Events != rec.LastSeq || uint64(len(acked)) != rec.LastSeq || got.Events != rec.Events {
			t.Errorf("audit counts %d events through seq %d, the reply %d; %d acknowledged", rec.Events, rec.LastSeq, got.Events, len(acked))
		}
		if m, err := e.store.NextAfter(ctx, id, 0); err != nil || m != nil {
			t.Errorf("a message of the session is left: %v %v", m, err)
		}
		_, err = e.cl.Append(ctx, client.AppendRequest{SessionID: id, Events: []schema.Envelope{{Type: schema.TypeMessageUser, Data: []byte(`{"content":"late"}`)}}})
		if client.CodeOf(err) != schema.CodeErased {
			t.Errorf("an append after the erase: %v, want erased", err)
		}
		t.Logf("%s: %d events acknowledged, audit %d through seq %d", l, len(acked), rec.Events, rec.LastSeq)
	})
}
