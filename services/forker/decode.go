package forker

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// decoded is one message on its way through readDecoded.
type decoded struct {
	m     *logstore.Msg
	e     schema.Envelope
	canon bool
	err   error
	done  chan struct{}
}

// readDecoded reads a session with ReadSession (the messages after
// after.StreamSeq: the zero Tail reads from its start) and hands each
// message, decoded, to fn in order. Decoding (the costly part) runs on a few worker
// goroutines while fn works on earlier messages, so the scan uses more
// than one core. fn learns whether each body is canonical
// (schema.DecodeCanonical) and may return logstore.ErrStop to end the read
// without error. At most a few hundred messages are in flight.
func readDecoded(ctx context.Context, st *logstore.Store, sessionID string, after logstore.Tail, fn func(m *logstore.Msg, e schema.Envelope, canonical bool, err error) error) (logstore.Tail, error) {
	workers := min(max(runtime.GOMAXPROCS(0), 1), 4)
	jobs := make(chan *decoded, 256)
	order := make(chan *decoded, 256)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for d := range jobs {
				d.e, d.canon, d.err = schema.DecodeCanonical(d.m.Data)
				close(d.done)
			}
		}()
	}
	var stopped atomic.Bool
	consumed := make(chan error, 1)
	go func() {
		var err error
		for d := range order {
			<-d.done
			if err != nil {
				continue // drain
			}
			if err = fn(d.m, d.e, d.canon, d.err); err != nil {
				stopped.Store(true)
			}
		}
		consumed <- err
	}()
	tail, rerr := st.ReadSession(ctx, sessionID, after.StreamSeq, func(m *logstore.Msg) error {
		if stopped.Load() {
			return logstore.ErrStop
		}
		d := &decoded{m: m, done: make(chan struct{})}
		order <- d // the consumer always drains
		jobs <- d  // and so do the workers
		return nil
	})
	close(jobs)
	close(order)
	wg.Wait()
	cerr := <-consumed
	if cerr != nil && !errors.Is(cerr, logstore.ErrStop) {
		return tail, cerr
	}
	var last *logstore.UnreadableError
	if errors.As(rerr, &last) {
		// The session's last message is not an event (its tail): the
		// verdict names its first unreadable message after after.
		_, err := st.ReadJudged(ctx, &logstore.Judge{SessionID: sessionID, Last: after}, nil)
		return tail, err
	}
	return tail, rerr
}
