package logstore

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// provisionBucket creates or updates a KV bucket whose stream allows
// message deletes: the buckets that hold a session's lease, claim, fork
// and source records, which an erase removes with the server's secure
// delete (DESIGN.md section 14). It is the stream jetstream's
// CreateOrUpdateKeyValue makes, but for DenyDelete, which that one sets.
// A bucket made before (denying deletes, which no update lifts) is kept
// so; an erase then purges its keys, and says the bytes may stay.
func (s *Store) provisionBucket(ctx context.Context, bucket, description string, markerTTL time.Duration) (jetstream.KeyValue, error) {
	name := "KV_" + bucket
	cfg := jetstream.StreamConfig{
		Name:              name,
		Description:       description,
		Subjects:          []string{"$KV." + bucket + ".>"},
		MaxMsgsPerSubject: 1,
		MaxBytes:          -1,
		MaxMsgSize:        -1,
		Storage:           jetstream.FileStorage,
		Replicas:          max(s.cfg.Replicas, 1),
		AllowRollup:       true,
		Duplicates:        2 * time.Minute,
		MaxMsgs:           -1,
		MaxConsumers:      -1,
		AllowDirect:       true,
		Discard:           jetstream.DiscardNew,
	}
	if markerTTL > 0 {
		cfg.AllowMsgTTL, cfg.SubjectDeleteMarkerTTL = true, markerTTL
	}
	if st, err := s.js.Stream(ctx, name); err == nil {
		old := st.CachedInfo().Config
		if old.DenyDelete {
			cfg.DenyDelete = true
			s.log.Warn("logstore: bucket denies message deletes (made before erasure could remove its records): an erase purges its keys, and their bytes may stay in its files until the server compacts them", "bucket", bucket)
		}
		// Settings the operator may have changed on the bucket stay.
		cfg.Placement, cfg.Compression, cfg.RePublish, cfg.Metadata = old.Placement, old.Compression, old.RePublish, old.Metadata
	}
	if _, err := s.js.CreateOrUpdateStream(ctx, cfg); err != nil {
		return nil, fmt.Errorf("logstore: provision bucket %s: %w", bucket, err)
	}
	kv, err := s.js.KeyValue(ctx, bucket)
	if err != nil {
		return nil, fmt.Errorf("logstore: bucket %s: %w", bucket, err)
	}
	return kv, nil
}

// lazyBucket is a KV bucket a store opens on first use and keeps once
// opened; one not there yet is looked up again on the next call.
type lazyBucket struct {
	mu sync.Mutex
	kv jetstream.KeyValue
}

// open returns the bucket named name, opened by this call or an earlier
// one; the error is jetstream's, for the caller to name.
func (b *lazyBucket) open(ctx context.Context, js jetstream.JetStream, name string) (jetstream.KeyValue, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.kv != nil {
		return b.kv, nil
	}
	kv, err := js.KeyValue(ctx, name)
	if err != nil {
		return nil, err
	}
	b.kv = kv
	return kv, nil
}
