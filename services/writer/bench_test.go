package writer_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/sessionlog/sessionlog/internal/gen"
	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/internal/procstat"
	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/services/writer"
)

func appendBody(sid string, seq uint64, n int) []byte {
	b := []byte(`{"sessionId":"` + sid + `","expectedSeq":` + strconv.FormatUint(seq-1, 10) + `,"events":[`)
	for i := 0; i < n; i++ {
		if i > 0 {
			b = append(b, ',')
		}
		s := seq + uint64(i)
		typ := "message/user"
		data := `{"content":"benchmark message of a typical small size"}`
		if s == 1 {
			typ, data = "session/created", "{}"
		}
		b = append(b, `{"eventId":"`+sid+"-"+strconv.FormatUint(s, 10)+`","type":"`+typ+`","data":`+data+`}`...)
	}
	return append(b, "]}"...)
}

// writerConn is how the benchmark's writer reaches the server.
type writerConn int

const (
	inProcess writerConn = iota // as `sessionlog up` runs it
	overTCP                     // a writer in its own process
	ownConn                     // over TCP, the endpoints on a second connection
	sealed                      // in process, the store sealing bodies (docs/adr/011-sealed-bodies.md)
)

// benchAppend runs b.N appends of batch events spread over 64 sessions,
// either calling Service.Append directly or through NATS request/reply
// (the agents' connection is TCP: they are other processes).
func benchAppend(b *testing.B, batch int, viaNATS bool) {
	benchAppendConn(b, batch, viaNATS, inProcess)
}

func benchAppendConn(b *testing.B, batch int, viaNATS bool, mode writerConn) {
	benchAppendStore(b, batch, viaNATS, mode, logstore.Config{MaxInflightBatches: 64})
}

func benchAppendStore(b *testing.B, batch int, viaNATS bool, mode writerConn, cfg logstore.Config) {
	srv := natstest.RunServer(b)
	var wopts []nats.Option
	if mode == inProcess || mode == sealed {
		wopts = append(wopts, nats.InProcessServer(srv))
	}
	wnc := natstest.Connect(b, srv, wopts...)
	cfg.SealBodies = cfg.SealBodies || mode == sealed
	st, err := logstore.Open(context.Background(), wnc, cfg)
	if err != nil {
		b.Fatal(err)
	}
	conn := wnc
	if mode == ownConn {
		conn = natstest.Connect(b, srv)
	}
	w := startWriterB(b, st, conn)
	nc := natstest.Connect(b, srv)
	const sessions = 64
	var next atomic.Int64
	seqs := make([]uint64, sessions)
	call := func(sid string, seq uint64, n int) error {
		body := appendBody(sid, seq, n)
		if !viaNATS {
			_, err := w.Append(context.Background(), body)
			return err
		}
		m, err := nc.Request(logstore.SubjectAppend, body, 10e9)
		if err != nil {
			return err
		}
		if c := m.Header.Get("Nats-Service-Error-Code"); c != "" {
			return fmt.Errorf("%s: %s", c, m.Data)
		}
		return nil
	}
	for i := range seqs {
		if err := call(fmt.Sprintf("b%d", i), 1, 1); err != nil {
			b.Fatal(err)
		}
		seqs[i] = 2
	}
	b.ResetTimer()
	report := measureCost(b)
	var wg sync.WaitGroup
	for i := 0; i < sessions; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sid := fmt.Sprintf("b%d", i)
			for next.Add(1) <= int64(b.N) {
				if err := call(sid, seqs[i], batch); err != nil {
					b.Error(err)
					return
				}
				seqs[i] += uint64(batch)
			}
		}()
	}
	wg.Wait()
	report(b.N * batch)
}

// measureCost starts counting the process's CPU and system calls; the
// function it returns reports, for the events done since, events/s, CPU
// per event and read and write calls per operation (b.N).
func measureCost(b *testing.B) func(events int) {
	cpu0 := procstat.CPU()
	r0, w0 := procstat.SysIO()
	return func(events int) {
		r1, w1 := procstat.SysIO()
		b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "ev/s")
		b.ReportMetric(float64(procstat.CPU()-cpu0)/1e3/float64(events), "cpu-µs/ev")
		b.ReportMetric(float64(r1-r0)/float64(b.N), "reads/op")
		b.ReportMetric(float64(w1-w0)/float64(b.N), "writes/op")
	}
}

func BenchmarkAppendDirect1(b *testing.B)  { benchAppend(b, 1, false) }
func BenchmarkAppendNATS1(b *testing.B)    { benchAppend(b, 1, true) }
func BenchmarkAppendDirect10(b *testing.B) { benchAppend(b, 10, false) }
func BenchmarkAppendNATS10(b *testing.B)   { benchAppend(b, 10, true) }

// BenchmarkAppendNATSLazy1 is BenchmarkAppendNATS1 without group commit,
// as `up --sync interval` runs the writer and as `bench append` measures
// writer-1 against raw-publish-1 (BenchmarkRawPublish1 here).
func BenchmarkAppendNATSLazy1(b *testing.B) {
	benchAppendStore(b, 1, true, inProcess, logstore.Config{MaxInflightBatches: 64, NoGroupCommit: true})
}

// The writer over TCP, and with the endpoints on a connection of their own.
func BenchmarkAppendNATSTCP1(b *testing.B)     { benchAppendConn(b, 1, true, overTCP) }
func BenchmarkAppendNATSOwnConn1(b *testing.B) { benchAppendConn(b, 1, true, ownConn) }

// BenchmarkAppendDirectSealed1 is BenchmarkAppendDirect1 with sealed
// bodies: what the seal costs an append.
func BenchmarkAppendDirectSealed1(b *testing.B) { benchAppendConn(b, 1, false, sealed) }

// BenchmarkRawPublish1 is the floor beside the writer benchmarks: the same
// events published straight to JetStream with the per-subject check.
func BenchmarkRawPublish1(b *testing.B) {
	srv := natstest.RunServer(b)
	nc := natstest.Connect(b, srv)
	// The store provisions the stream; the floor publishes around it.
	if _, err := logstore.Open(context.Background(), nc, logstore.Config{}); err != nil {
		b.Fatal(err)
	}
	js := natstest.JetStream(b, nc)
	const sessions = 64
	var next atomic.Int64
	b.ResetTimer()
	report := measureCost(b)
	var wg sync.WaitGroup
	for i := 0; i < sessions; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sid := fmt.Sprintf("r%d", i)
			var last uint64
			for n := uint64(1); next.Add(1) <= int64(b.N); n++ {
				m := nats.NewMsg(logstore.SubjectPrefix + sid)
				m.Data = appendBody(sid, n, 1)
				m.Header.Set(logstore.HeaderMsgID, sid+":"+strconv.FormatUint(n, 10))
				m.Header.Set(logstore.HeaderExpectedSeq, strconv.FormatUint(last, 10))
				ack, err := js.PublishMsg(context.Background(), m)
				if err != nil {
					b.Error(err)
					return
				}
				last = ack.Sequence
			}
		}()
	}
	wg.Wait()
	report(b.N)
}

// BenchmarkReadPage reads the second page of 1000 events of a session of
// 3000 in process (ReadPage over an embedded server, whose work counts
// too), as a reader that read the first page before it asks again.
func BenchmarkReadPage(b *testing.B) {
	ctx := context.Background()
	st := benchReadStore(b)
	r := writer.StoreReader{Store: st}
	for _, after := range []uint64{0, 1000} {
		if p, err := r.Read(ctx, writer.ReadRequest{SessionID: "bench-read", AfterSeq: after, Limit: 1000}); err != nil || len(p.Events) != 1000 {
			b.Fatalf("after %d: %d events, %v", after, len(p.Events), err)
		}
	}
	b.ResetTimer()
	for range b.N {
		if _, err := r.Read(ctx, writer.ReadRequest{SessionID: "bench-read", AfterSeq: 1000, Limit: 1000}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReadPageRaw is what BenchmarkReadPage costs without the
// judge's verdict: the tail and the same 1000 bodies with one batched get
// (logstore.ReadBatch), no count, no headers, nothing checked.
func BenchmarkReadPageRaw(b *testing.B) {
	ctx := context.Background()
	st := benchReadStore(b)
	b.ResetTimer()
	for range b.N {
		tail, err := st.Tail(ctx, "bench-read")
		if err != nil {
			b.Fatal(err)
		}
		if bodies, err := st.ReadBatch(ctx, "bench-read", tail, 1000, 1000, 0); err != nil || len(bodies) != 1000 {
			b.Fatalf("%d bodies, %v", len(bodies), err)
		}
	}
}

// benchReadStore is a store over an embedded server, reached in process,
// holding the session bench-read of 3000 events.
func benchReadStore(b *testing.B) *logstore.Store {
	srv := natstest.RunServer(b)
	nc := natstest.Connect(b, srv, nats.InProcessServer(srv))
	ctx := context.Background()
	st, err := logstore.Open(ctx, nc, logstore.Config{})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := gen.Seed(ctx, st, "bench-read", 3000, schema.MaxBatchEvents); err != nil {
		b.Fatal(err)
	}
	return st
}
