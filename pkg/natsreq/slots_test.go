package natsreq

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sessionlog/sessionlog/internal/natstest"
)

// A reply slot answers as RequestMsg does: the answer to this request
// (never a late answer to an earlier one on the same slot), no
// responders, a timeout, the context's end; when every slot is busy the
// request still goes out through RequestMsg.
func TestReplySlots(t *testing.T) {
	release, sentLate := make(chan struct{}), make(chan struct{})
	p := echoSlots(t, func(m *nats.Msg) {
		switch string(m.Data) {
		case "never":
			return
		case "slow":
			go func() {
				<-release
				_ = m.Respond([]byte("late"))
				close(sentLate)
			}()
			return
		}
		_ = m.Respond(append([]byte("re:"), m.Data...))
	})
	ctx := context.Background()
	req := func(ctx context.Context, data string, timeout time.Duration) (string, error) {
		m, err := p.Request(ctx, &nats.Msg{Subject: "echo", Data: []byte(data)}, timeout)
		if err != nil {
			return "", err
		}
		return string(m.Data), nil
	}

	if got, err := req(ctx, "a", time.Second); err != nil || got != "re:a" {
		t.Fatalf("answer: %q %v", got, err)
	}
	// Unanswered in time: a timeout; its late answer, arriving while the
	// same slot waits for the next request, is not taken for that one.
	if _, err := req(ctx, "slow", 50*time.Millisecond); !errors.Is(err, nats.ErrTimeout) {
		t.Fatalf("slow: %v, want a timeout", err)
	}
	close(release)
	<-sentLate
	sl := <-p.free
	for deadline := time.Now().Add(5 * time.Second); len(sl.ch) == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the late answer never reached the slot")
		}
	}
	p.put(sl)
	if got, err := req(ctx, "b", time.Second); err != nil || got != "re:b" {
		t.Fatalf("after a late answer: %q %v", got, err)
	}
	if got, err := req(ctx, "c", time.Second); err != nil || got != "re:c" {
		t.Fatalf("after the late answer arrived: %q %v", got, err)
	}
	if p.made != 1 {
		t.Fatalf("%d slots made, want 1 (reused)", p.made)
	}

	if _, err := p.Request(ctx, &nats.Msg{Subject: "nobody.here"}, time.Second); !errors.Is(err, nats.ErrNoResponders) {
		t.Fatalf("no responders: %v", err)
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
	defer cancel()
	if _, err := p.Request(cctx, &nats.Msg{Subject: "echo", Data: []byte("never")}, time.Hour); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("context deadline: %v", err)
	}

	// No timeout of its own: the context alone ends the wait.
	cctx2, cancel2 := context.WithTimeout(ctx, 30*time.Millisecond)
	defer cancel2()
	if _, err := p.Request(cctx2, &nats.Msg{Subject: "echo", Data: []byte("never")}, 0); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("context deadline, no timeout: %v", err)
	}

	// The only slot is taken: the next request is answered all the same,
	// and times out as a slot's would.
	sl = p.get()
	if sl == nil {
		t.Fatal("no free slot")
	}
	if got, err := req(ctx, "d", time.Second); err != nil || got != "re:d" {
		t.Fatalf("without a free slot: %q %v", got, err)
	}
	if _, err := req(ctx, "never", 30*time.Millisecond); !errors.Is(err, nats.ErrTimeout) {
		t.Fatalf("without a free slot, unanswered: %v, want a timeout", err)
	}
	p.put(sl)
}

// A slot's timer is left armed by one request for the next: a request
// times out on its own timeout, not the later one an earlier request
// armed, and a firing armed by an earlier request does not end a request
// whose own timeout is still running.
func TestReplySlotTimerKeptArmed(t *testing.T) {
	p := echoSlots(t, func(m *nats.Msg) {
		if string(m.Data) != "never" {
			_ = m.Respond(m.Data)
		}
	})
	ctx := context.Background()
	req := func(ctx context.Context, data string, timeout time.Duration) error {
		_, err := p.Request(ctx, &nats.Msg{Subject: "echo", Data: []byte(data)}, timeout)
		return err
	}

	// Armed for an hour by the first request, the timer is brought
	// forward: the second request's timeout ends it, long before the
	// context's deadline would.
	if err := req(ctx, "a", time.Hour); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := req(cctx, "never", 30*time.Millisecond); !errors.Is(err, nats.ErrTimeout) {
		t.Fatalf("unanswered after a request with a longer timeout: %v, want a timeout", err)
	}

	// Armed to fire at once, as a request with a short timeout left it,
	// the timer fires while the next request, whose timeout is an hour,
	// waits: that request is answered.
	for i := range 20 {
		sl := <-p.free
		sl.arm(since() + time.Microsecond)
		p.put(sl)
		if err := req(ctx, "b", time.Hour); err != nil {
			t.Fatalf("request %d after an earlier firing: %v", i, err)
		}
	}
}

// echoSlots is a pool of one slot on a server whose subject echo h
// answers (from a connection of its own).
func echoSlots(t *testing.T, h nats.MsgHandler) *Slots {
	srv := natstest.RunServer(t)
	nc := natstest.Connect(t, srv)
	svc := natstest.Connect(t, srv)
	sub, err := svc.Subscribe("echo", h)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Drain() })
	if err := svc.Flush(); err != nil {
		t.Fatal(err)
	}
	return New(nc, 1)
}

// BenchmarkRequest shows what the reply slots buy over the library path,
// nats.Conn.RequestMsg (one wildcard inbox, a handler goroutine between
// the reader and the caller), against an echo service on an embedded
// server: serial requests, and eight concurrent callers per GOMAXPROCS.
func BenchmarkRequest(b *testing.B) {
	srv := natstest.RunServer(b)
	nc := natstest.Connect(b, srv)
	svc := natstest.Connect(b, srv)
	sub, err := svc.Subscribe("echo", func(m *nats.Msg) { _ = m.Respond(m.Data) })
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = sub.Drain() }()
	if err := svc.Flush(); err != nil {
		b.Fatal(err)
	}
	p := New(nc, DefaultMax)
	ctx := context.Background()
	data := []byte(`{"stream":"SESSIONS","seq":12}`)
	paths := []struct {
		name string
		req  func() error
	}{
		{"Slots", func() error {
			_, err := p.Request(ctx, &nats.Msg{Subject: "echo", Data: data}, 5*time.Second)
			return err
		}},
		{"RequestMsg", func() error {
			_, err := nc.RequestMsg(&nats.Msg{Subject: "echo", Data: data}, 5*time.Second)
			return err
		}},
	}
	// RequestMsg's sub-benchmarks report its time over the slots' just
	// measured (the metric x-slots): what the slots buy.
	var slotNs float64
	for _, mode := range []string{"serial", "parallel"} {
		for _, path := range paths {
			b.Run(mode+"/"+path.name, func(b *testing.B) {
				b.ReportAllocs()
				if mode == "parallel" {
					b.SetParallelism(8)
					b.RunParallel(func(pb *testing.PB) {
						for pb.Next() {
							if err := path.req(); err != nil {
								b.Error(err)
								return
							}
						}
					})
				} else {
					for b.Loop() {
						if err := path.req(); err != nil {
							b.Fatal(err)
						}
					}
				}
				ns := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
				if path.name == "Slots" {
					slotNs = ns
				} else if slotNs > 0 {
					b.ReportMetric(ns/slotNs, "x-slots")
				}
			})
		}
	}
}
