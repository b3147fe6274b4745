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
}

// decodeChunk is the messages readDecoded hands to a worker at once: one
// channel send, one wake-up and one done signal for a chunk rather than
// for each message (BenchmarkScan10000/decoded against
// decoded-per-message).
type decodeChunk struct {
	ds   []decoded
	done chan struct{}
}

// chunkSize is the messages of one decodeChunk; chunksInFlight bounds the
// chunks read and not yet consumed.
const (
	chunkSize      = 64
	chunksInFlight = 8
)

// readDecoded reads a session with ReadSession (the messages after
// after.StreamSeq: the zero Tail reads from its start) and hands each
// message, decoded, to fn in order. Decoding (the costly part) runs on a few worker
// goroutines while fn works on earlier messages, so the scan uses more
// than one core. fn learns whether each body is canonical
// (schema.DecodeCanonical) and may return logstore.ErrStop to end the read
// without error. At most a few hundred messages are in flight.
func readDecoded(ctx context.Context, st Log, sessionID string, after logstore.Tail, fn func(m *logstore.Msg, e schema.Envelope, canonical bool, err error) error) (logstore.Tail, error) {
	return readDecodedBy(ctx, st, sessionID, after, nil, chunkSize, fn)
}

// tailReader is a Log that reads a session up to a tail read before
// (*logstore.Store).
type tailReader interface {
	ReadSessionTo(ctx context.Context, sessionID string, afterStreamSeq uint64, tail logstore.Tail, fn func(*logstore.Msg) error) (logstore.Tail, error)
}

// pendingTail is a session's tail being read from the leader (its Tail
// and error once read); readTail starts the read, nil when st cannot read
// up to a given tail.
type pendingTail func() (logstore.Tail, error)

func readTail(ctx context.Context, st Log, sessionID string) pendingTail {
	if _, ok := st.(tailReader); !ok {
		return nil
	}
	var t logstore.Tail
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		t, err = st.Tail(ctx, sessionID)
	}()
	return func() (logstore.Tail, error) {
		<-done
		return t, err
	}
}

// readDecodedBy is readDecoded in chunks of size messages, up to tail
// when it is not nil (else up to the tail read first, as ReadSession
// reads).
func readDecodedBy(ctx context.Context, st Log, sessionID string, after logstore.Tail, tail pendingTail, size int, fn func(m *logstore.Msg, e schema.Envelope, canonical bool, err error) error) (logstore.Tail, error) {
	read := func(f func(*logstore.Msg) error) (logstore.Tail, error) {
		return st.ReadSession(ctx, sessionID, after.StreamSeq, f)
	}
	if tr, ok := st.(tailReader); ok && tail != nil {
		read = func(f func(*logstore.Msg) error) (logstore.Tail, error) {
			t, err := tail()
			if err != nil {
				return logstore.Tail{}, err
			}
			return tr.ReadSessionTo(ctx, sessionID, after.StreamSeq, t, f)
		}
	}
	workers := min(max(runtime.GOMAXPROCS(0), 1), 4)
	jobs := make(chan *decodeChunk, chunksInFlight)
	order := make(chan *decodeChunk, chunksInFlight)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := range jobs {
				for i := range c.ds {
					d := &c.ds[i]
					d.e, d.canon, d.err = schema.DecodeCanonical(d.m.Data)
				}
				close(c.done)
			}
		}()
	}
	var stopped atomic.Bool
	consumed := make(chan error, 1)
	go func() {
		var err error
		for c := range order {
			<-c.done
			for i := range c.ds {
				if err != nil {
					break // drain
				}
				d := &c.ds[i]
				if err = fn(d.m, d.e, d.canon, d.err); err != nil {
					stopped.Store(true)
				}
			}
		}
		consumed <- err
	}()
	var chunk *decodeChunk
	flush := func() {
		if chunk != nil {
			order <- chunk // the consumer always drains
			jobs <- chunk  // and so do the workers
			chunk = nil
		}
	}
	readTo, rerr := read(func(m *logstore.Msg) error {
		if stopped.Load() {
			return logstore.ErrStop
		}
		if chunk == nil {
			chunk = &decodeChunk{ds: make([]decoded, 0, size), done: make(chan struct{})}
		}
		chunk.ds = append(chunk.ds, decoded{m: m})
		if len(chunk.ds) == size {
			flush()
		}
		return nil
	})
	flush()
	close(jobs)
	close(order)
	wg.Wait()
	cerr := <-consumed
	if cerr != nil && !errors.Is(cerr, logstore.ErrStop) {
		return readTo, cerr
	}
	var last *logstore.UnreadableError
	if errors.As(rerr, &last) {
		// The session's last message is not an event (its tail): the
		// verdict names its first unreadable message after after.
		_, err := st.ReadJudged(ctx, &logstore.Judge{SessionID: sessionID, Last: after}, nil)
		return readTo, err
	}
	return readTo, rerr
}
