package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// `sessionlog tail [<id>]`: follow new events live.

func runTail(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	fs, nf := sreFlags("tail", stderr)
	after := fs.Int64("after", -1, "with a session: also print its stored events with seq > N first (-1: only new ones)")
	noLive := fs.Bool("no-live", false, "do not print transient events (sessions.live.*)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	var id string
	switch fs.NArg() {
	case 0:
	case 1:
		var err error
		if id, err = oneID(fs, "tail"); err != nil {
			return err
		}
	default:
		return usageErrorf("usage: sessionlog tail [<sessionId>] [flags]")
	}
	if *after >= 0 && id == "" {
		return usageErrorf("--after needs a session id")
	}
	c, err := openSRE(ctx, "tail", fs, nf, stderr)
	if err != nil {
		return err
	}
	defer c.close()
	defer func() { err = c.explain(err) }()
	ctx = c.ctx
	ctx, cancel := signalContext(ctx)
	defer cancel()
	return tailEvents(ctx, c.store, id, *after, !*noLive, stdout)
}

// liveLine is how tail prints a transient event.
type liveLine struct {
	Transient bool            `json:"transient"`
	SessionID string          `json:"sessionId"`
	Event     json.RawMessage `json:"event"`
}

// tailEvents prints durable events (ordered consumers, one per stream,
// from now or after a seq) and transient ones until ctx ends.
func tailEvents(ctx context.Context, st *logstore.Store, id string, after int64, live bool, stdout io.Writer) error {
	lines := make(chan []byte, 1024)
	var streams []string
	var filter []string
	if id != "" {
		loc, err := logstore.Locate(id)
		if err != nil {
			return err
		}
		streams, filter = []string{loc.Stream}, []string{loc.Subject}
	} else {
		streams = logstore.Streams()
	}
	if live {
		subj := logstore.LivePrefix + "*"
		if id != "" {
			var err error
			if subj, err = logstore.LiveSubject(id); err != nil {
				return err
			}
		}
		sub, err := st.Conn().Subscribe(subj, func(m *natsMsg) {
			sid := strings.TrimPrefix(m.Subject, logstore.LivePrefix)
			ev := json.RawMessage(m.Data)
			if !json.Valid(m.Data) {
				ev, _ = json.Marshal(string(m.Data))
			}
			b, _ := json.Marshal(liveLine{Transient: true, SessionID: sid, Event: ev})
			select {
			case lines <- b:
			default: // a slow terminal drops transient events, never durable ones
			}
		})
		if err != nil {
			return err
		}
		defer sub.Unsubscribe()
	}
	for _, name := range streams {
		cfg := jetstream.OrderedConsumerConfig{FilterSubjects: filter, DeliverPolicy: jetstream.DeliverNewPolicy}
		if after >= 0 {
			// Start right after the stored event with seq == after.
			start := uint64(1)
			if after > 0 {
				var found uint64
				tail, err := st.ReadSession(ctx, id, 0, func(m *logstore.Msg) error {
					if e, err := schema.Decode(m.Data); err == nil && e.Seq == uint64(after) {
						found = m.StreamSeq
						return logstore.ErrStop
					}
					return nil
				})
				if err != nil {
					return err
				}
				if found == 0 {
					found = tail.StreamSeq // fewer events than --after: only new ones
				}
				start = found + 1
			}
			cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, start
		}
		cons, err := st.JetStream().OrderedConsumer(ctx, name, cfg)
		if err != nil {
			return fmt.Errorf("tail %s: %w", name, err)
		}
		cc, err := cons.Consume(func(m jetstream.Msg) {
			b := append([]byte(nil), m.Data()...)
			select {
			case lines <- b:
			case <-ctx.Done():
			}
		})
		if err != nil {
			return fmt.Errorf("tail %s: %w", name, err)
		}
		defer cc.Stop()
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case b := <-lines:
			if err := writeLine(stdout, b); err != nil {
				return err
			}
		}
	}
}
