package bench

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/synadia-io/orbit.go/jetstreamext"

	"github.com/sessionlog/sessionlog/internal/logstore"
)

// The raw floor of an import: the very messages the import stored (body
// bytes and logstore's headers), published again straight to JetStream on
// the same server, in atomic batches of the import's size, one session
// after another per job, as many sessions at once as the import keeps
// appends in flight. It leaves out everything that is the importer's own
// work (reading and mapping the files, the writer's request, checks and
// fold), so import/floor is what the project costs over the store.
//
// The stored messages are first copied to spool files (one per session,
// outside the timed part), so the floor never holds every session in
// memory either; a job reads its session's spool (one file read, a few
// hundred KB) before publishing it.

// FloorSession is one session of the floor: its spool and where it is
// published again.
type FloorSession struct {
	// ID is the floor's session id (the import's stored the same bytes
	// under another id of the same length) and Subject its subject.
	ID, Subject string
	Spool       string
	Events      int
	// Bytes is the size of the message bodies.
	Bytes int64
}

// Spool is the writing side of a FloorSession's spool file.
type Spool struct {
	f     *os.File
	w     *bufio.Writer
	n     int
	bytes int64
	buf   []byte
}

// CreateSpool starts a spool file at path.
func CreateSpool(path string) (*Spool, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	return &Spool{f: f, w: bufio.NewWriterSize(f, 256<<10)}, nil
}

// Add spools one stored message: its event id (from the message id), the
// headers logstore sets that do not name the session, and its body.
func (s *Spool) Add(m *logstore.Msg) error {
	_, eventID, ok := strings.Cut(m.Header.Get(logstore.HeaderMsgID), ":")
	if !ok {
		return fmt.Errorf("spool: stored message %d has no message id", m.StreamSeq)
	}
	s.buf = s.buf[:0]
	for _, f := range [][]byte{[]byte(eventID), []byte(m.Header.Get(logstore.HeaderType)), []byte(m.Header.Get(logstore.HeaderSeq)),
		[]byte(m.Header.Get(logstore.HeaderSchema)), m.Data} {
		s.buf = binary.AppendUvarint(s.buf, uint64(len(f)))
		s.buf = append(s.buf, f...)
	}
	s.n++
	s.bytes += int64(len(m.Data))
	_, err := s.w.Write(s.buf)
	return err
}

// Close finishes the spool and returns the number of messages in it and
// the size of their bodies.
func (s *Spool) Close() (int, int64, error) {
	err := s.w.Flush()
	if cerr := s.f.Close(); err == nil {
		err = cerr
	}
	return s.n, s.bytes, err
}

// ImportFloor publishes every session's spool again on nc (a connection
// of the kind the writer has) in atomic batches of batch messages, jobs
// sessions at a time, and returns the messages it published.
func ImportFloor(ctx context.Context, nc *nats.Conn, sessions []FloorSession, batch, jobs int) (int, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return 0, err
	}
	var (
		next   atomic.Int64
		wg     sync.WaitGroup
		events int
		errs   = make(chan error, jobs)
	)
	for _, s := range sessions {
		events += s.Events
	}
	for range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= len(sessions) {
					return
				}
				if err := publishSpool(ctx, js, sessions[i], batch); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	select {
	case err := <-errs:
		return 0, err
	default:
	}
	return events, nil
}

// publishSpool publishes one session's spool in batches.
func publishSpool(ctx context.Context, js jetstream.JetStream, s FloorSession, batch int) error {
	b, err := os.ReadFile(s.Spool)
	if err != nil {
		return err
	}
	msgs := make([]*nats.Msg, 0, s.Events)
	for len(b) > 0 {
		var f [5][]byte
		for k := range f {
			n, w := binary.Uvarint(b)
			if w <= 0 || uint64(len(b)-w) < n {
				return fmt.Errorf("spool %s: damaged", s.Spool)
			}
			f[k], b = b[w:w+int(n)], b[w+int(n):]
		}
		// The headers logstore.Store.Append sets (append.go).
		vals := [5]string{logstore.MsgID(s.ID, string(f[0])), string(f[1]), string(f[2]), string(f[3])}
		h := make(nats.Header, 5)
		h[logstore.HeaderMsgID], h[logstore.HeaderType], h[logstore.HeaderSeq], h[logstore.HeaderSchema] = vals[0:1:1], vals[1:2:2], vals[2:3:3], vals[3:4:4]
		msgs = append(msgs, &nats.Msg{Subject: s.Subject, Header: h, Data: f[4]})
	}
	var expected uint64 // the subject's last stream seq: none yet
	for i := 0; i < len(msgs); i += batch {
		part := msgs[i:min(i+batch, len(msgs))]
		// The expectation goes on a batch's first message only.
		part[0].Header[logstore.HeaderExpectedSeq] = []string{strconv.FormatUint(expected, 10)}
		if expected, err = publishBatch(ctx, js, part); err != nil {
			return fmt.Errorf("floor %s: %w", s.ID, err)
		}
	}
	return nil
}

// publishBatch publishes msgs as one atomic batch and returns the last
// one's stream seq.
func publishBatch(ctx context.Context, js jetstream.JetStream, msgs []*nats.Msg) (uint64, error) {
	if len(msgs) == 0 {
		return 0, errors.New("empty batch")
	}
	b, err := jetstreamext.NewBatchPublisher(js, jetstreamext.BatchFlowControl{AckFirst: false})
	if err != nil {
		return 0, err
	}
	for _, m := range msgs[:len(msgs)-1] {
		if err := b.AddMsg(m); err != nil {
			_ = b.Discard()
			return 0, err
		}
	}
	ack, err := b.CommitMsg(ctx, msgs[len(msgs)-1])
	if err != nil {
		return 0, err
	}
	return ack.Sequence, nil
}
