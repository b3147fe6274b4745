package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/pkg/session"
)

// Log is the read access Load needs: a session's stored events in order,
// consistent up to the tail the stream leader reports. *logstore.Store
// implements it; so does Client.Log (through the client's connection).
type Log interface {
	ReadSession(ctx context.Context, sessionID string, afterStreamSeq uint64, fn func(*logstore.Msg) error) (logstore.Tail, error)
}

var _ Log = (*logstore.Store)(nil)

// Load rebuilds the session's State from the log. A session that does not
// exist loads as an empty state (Exists() false). A session holding an
// event this reader cannot decode or fold (a newer schema, an unknown
// required type) is refused with code unreadable, never guessed at.
func Load(ctx context.Context, log Log, sessionID string) (*session.State, error) {
	if !schema.ValidSessionID(sessionID) {
		return nil, errorf(schema.CodeBadRequest, "session id %q is not valid", clip(sessionID))
	}
	st := session.New(sessionID)
	_, err := log.ReadSession(ctx, sessionID, 0, func(m *logstore.Msg) error {
		e, err := schema.Decode(m.Data)
		if err != nil {
			return errorf(schema.CodeUnreadable, "session %s at stream seq %d: %v", sessionID, m.StreamSeq, err)
		}
		if err := st.Apply(&e); err != nil {
			return errorf(schema.CodeUnreadable, "session %s seq %d does not fold: %v", sessionID, e.Seq, err)
		}
		return nil
	})
	if err != nil {
		var ce *Error
		if errors.As(err, &ce) {
			return nil, err
		}
		return nil, fmt.Errorf("client: load %s: %w", sessionID, err)
	}
	return st, nil
}

// LoadState implements StateLoader (for Recover) through the client's own
// connection.
func (c *Client) LoadState(ctx context.Context, sessionID string) (*session.State, error) {
	return Load(ctx, c.Log(), sessionID)
}

// Log reads sessions through the client's NATS connection: the tail from
// the stream leader ($JS.API.STREAM.MSG.GET, never Direct Get, which a
// lagging replica may answer) and the events through an ordered consumer.
// The connection's user needs read access to the SESSIONS stream's
// JetStream API.
func (c *Client) Log() Log { return &natsLog{nc: c.nc, timeout: c.timeout} }

type natsLog struct {
	nc      *nats.Conn
	timeout time.Duration
}

type msgGetReply struct {
	Error   *jetstream.APIError `json:"error"`
	Message *struct {
		Subject  string `json:"subject"`
		Sequence uint64 `json:"seq"`
		Header   []byte `json:"hdrs"`
		Data     []byte `json:"data"`
	} `json:"message"`
}

func (l *natsLog) tail(ctx context.Context, loc logstore.Location) (logstore.Tail, error) {
	req, _ := json.Marshal(map[string]string{"last_by_subj": loc.Subject})
	ctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	m, err := l.nc.RequestWithContext(ctx, "$JS.API.STREAM.MSG.GET."+loc.Stream, req)
	if err != nil {
		return logstore.Tail{}, err
	}
	var r msgGetReply
	if err := json.Unmarshal(m.Data, &r); err != nil {
		return logstore.Tail{}, err
	}
	if r.Error != nil {
		if r.Error.ErrorCode == jetstream.JSErrCodeMessageNotFound {
			return logstore.Tail{}, nil
		}
		return logstore.Tail{}, r.Error
	}
	if r.Message == nil {
		return logstore.Tail{}, jetstream.ErrInvalidJetStreamResponse
	}
	t := logstore.Tail{StreamSeq: r.Message.Sequence}
	if len(r.Message.Header) > 0 {
		if h, err := nats.DecodeHeadersMsg(r.Message.Header); err == nil {
			t.Seq, _ = strconv.ParseUint(h.Get(logstore.HeaderSeq), 10, 64)
			_, t.EventID, _ = strings.Cut(h.Get(logstore.HeaderMsgID), ":")
		}
	}
	return t, nil
}

func (l *natsLog) ReadSession(ctx context.Context, sessionID string, after uint64, fn func(*logstore.Msg) error) (logstore.Tail, error) {
	loc, err := logstore.Locate(sessionID)
	if err != nil {
		return logstore.Tail{}, err
	}
	tail, err := l.tail(ctx, loc)
	if err != nil || tail.StreamSeq <= after {
		return tail, err
	}
	js, err := jetstream.New(l.nc)
	if err != nil {
		return tail, err
	}
	cons, err := js.OrderedConsumer(ctx, loc.Stream, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{loc.Subject},
		DeliverPolicy:  jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:    after + 1,
	})
	if err != nil {
		return tail, err
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(500))
	if err != nil {
		return tail, err
	}
	defer it.Stop()
	stop := context.AfterFunc(ctx, it.Stop)
	defer stop()
	for {
		jm, err := it.Next()
		if err != nil {
			if ctx.Err() != nil {
				return tail, ctx.Err()
			}
			return tail, err
		}
		md, err := jm.Metadata()
		if err != nil {
			return tail, err
		}
		if md.Sequence.Stream > tail.StreamSeq {
			return tail, nil
		}
		m := &logstore.Msg{StreamSeq: md.Sequence.Stream, Subject: jm.Subject(), Header: jm.Headers(), Data: jm.Data()}
		if err := fn(m); err != nil {
			if errors.Is(err, logstore.ErrStop) {
				return tail, nil
			}
			return tail, err
		}
		if md.Sequence.Stream == tail.StreamSeq {
			return tail, nil
		}
	}
}
