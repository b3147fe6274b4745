package logstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// LostData is what nats-server says it lost of a stream's stored messages
// when it recovered the stream's files (the "lost" of the stream's state:
// nats.go's StreamState has no field for it). Msgs are the sequences it
// names; a damaged record at a block's end (a torn write, a flipped bit,
// when the server rebuilds the block from its records) is counted in
// Bytes with no sequence named. The server keeps it in memory until it
// restarts, and only the stream's leader answers: a follower's record is
// not read (nats-server v2.15.3 fills "lost" only in the detailed state
// of STREAM.INFO, which only the leader answers; the monitoring's jsz,
// which every replica answers, gives each stream's fast state, which has
// no "lost"). StreamLost keeps each record it reads in LostBucket.
type LostData struct {
	Msgs  []uint64 `json:"msgs"`
	Bytes uint64   `json:"bytes"`
}

// lostChecked is how many of the sequences a replicated stream's record
// names StreamLost looks up.
const lostChecked = 1000

// ServerLost reads what nats-server says now it lost of a stream, nil
// when nothing (StreamLost keeps it past the server's restart). It asks for the stream's info with deleted_details (the server fills
// "lost" only in its detailed state), so the answer lists the stream's
// deleted sequences too.
//
// The record is of the node that answers. On a stream of one replica
// nothing else has the messages: the record is the stream's loss. On a
// replicated stream the node may have caught up from the others since
// (the server keeps its record all the same): ServerLost keeps only the
// named sequences the stream does not hold now (of the first
// lostChecked), and nil when it holds them all or the record names none
// (bytes only: nothing to look up).
func (s *Store) ServerLost(ctx context.Context, stream string) (*LostData, error) {
	ld, _, err := s.serverLost(ctx, stream)
	return ld, err
}

// serverLost is ServerLost and the recovery its record is of (lostRecord).
func (s *Store) serverLost(ctx context.Context, stream string) (*LostData, string, error) {
	ld, replicas, recovery, err := s.lostRecord(ctx, stream)
	if err != nil || ld == nil || replicas <= 1 {
		return ld, recovery, err
	}
	var gone []uint64
	for _, q := range ld.Msgs[:min(len(ld.Msgs), lostChecked)] {
		m, err := s.msgGet(ctx, stream, msgGetRequest{Seq: q})
		if err != nil {
			return nil, "", fmt.Errorf("logstore: stream %s: seq %d, which the server says it lost: %w", stream, q, err)
		}
		if m == nil {
			gone = append(gone, q)
		}
	}
	if len(gone) == 0 {
		return nil, recovery, nil
	}
	return &LostData{Msgs: gone, Bytes: ld.Bytes}, recovery, nil
}

// lostRecord is the record of the node answering for stream, the
// stream's replica count, and which recovery the record is of: the
// answering leader's name and when it took the lead (a clustered
// stream), or its name and the id the server draws at each start (a
// server of no cluster, which is the one connected to). The same record
// read again has the same recovery until the server restarts or the
// stream's leader changes, so a later loss that names the same sequences
// or bytes is told apart from one already kept (and acknowledged).
func (s *Store) lostRecord(ctx context.Context, stream string) (*LostData, int, string, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	defer cancel()
	prefix := s.js.Options().APIPrefix
	if prefix == "" {
		prefix = jetstream.DefaultAPIPrefix
	} else if !strings.HasSuffix(prefix, ".") {
		prefix += "."
	}
	m, err := s.nc.RequestWithContext(ctx, prefix+"STREAM.INFO."+stream, []byte(`{"deleted_details":true}`))
	if err != nil {
		return nil, 0, "", fmt.Errorf("logstore: stream %s: %w", stream, err)
	}
	var info struct {
		Config struct {
			Replicas int `json:"num_replicas"`
		} `json:"config"`
		Cluster struct {
			Leader      string     `json:"leader"`
			LeaderSince *time.Time `json:"leader_since"`
		} `json:"cluster"`
		State struct {
			Lost *LostData `json:"lost"`
		} `json:"state"`
		Error *struct {
			Code        int    `json:"code"`
			Description string `json:"description"`
		} `json:"error"`
	}
	if err := json.Unmarshal(m.Data, &info); err != nil {
		return nil, 0, "", fmt.Errorf("logstore: stream %s: info: %w", stream, err)
	}
	if info.Error != nil {
		return nil, 0, "", fmt.Errorf("logstore: stream %s: %w", stream, errors.New(info.Error.Description))
	}
	recovery := info.Cluster.Leader
	if info.Cluster.LeaderSince != nil {
		recovery += "@" + info.Cluster.LeaderSince.UTC().Format(time.RFC3339Nano)
	} else if info.Cluster.Leader == s.nc.ConnectedServerName() {
		recovery += "@" + s.nc.ConnectedServerId()
	}
	if l := info.State.Lost; l != nil && (len(l.Msgs) > 0 || l.Bytes > 0) {
		return l, info.Config.Replicas, recovery, nil
	}
	return nil, info.Config.Replicas, recovery, nil
}

// Reconnects is how many times the store's NATS connection reconnected:
// a single server that restarted is one more.
func (s *Store) Reconnects() uint64 { return s.nc.Stats().Reconnects }

// lostShown is how many of the sequences it names Describe lists.
const lostShown = 5

// Describe says what the server lost: the count and the first sequences
// it names, or the bytes of damaged records it dropped when it names
// none.
func (l *LostData) Describe() string {
	if len(l.Msgs) == 0 {
		return fmt.Sprintf("dropped %d bytes of damaged records when it recovered its files (it names no sequence)", l.Bytes)
	}
	seqs := make([]string, 0, lostShown+1)
	for _, q := range l.Msgs[:min(len(l.Msgs), lostShown)] {
		seqs = append(seqs, strconv.FormatUint(q, 10))
	}
	if len(l.Msgs) > lostShown {
		seqs = append(seqs, "…")
	}
	n := fmt.Sprintf("%d stored messages", len(l.Msgs))
	if len(l.Msgs) == 1 {
		n = "1 stored message"
	}
	return fmt.Sprintf("lost %s (seqs %s; %d bytes) when it recovered its files", n, strings.Join(seqs, ", "), l.Bytes)
}
