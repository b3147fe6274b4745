package logstore

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"errors"
	"fmt"
	"maps"
	"strconv"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionlog/sessionlog/pkg/schema"
)

// Sealed bodies (DESIGN.md section 2, docs/adr/011-sealed-bodies.md). A
// session's events are stored encrypted with the session's own data key
// (AES-256-GCM, a random 12-byte nonce before the ciphertext, the
// message's Nats-Msg-Id as associated data), marked by the header
// SL-Seal: 1. The key is a random 32 bytes in the KV bucket SESSION_KEYS,
// written once (Create: never replaced, so no earlier revision of it
// ever exists) by the first write of the session. An erase securely
// deletes the key's one message and then purges the session's subject:
// what stays in the stream's block files is ciphertext whose key is gone.
// Every read in this package opens the bodies, so callers see the plain
// envelope; SL-Prev, ChainHash and the audit digest are over the plain
// body. A message without SL-Seal (written before sealing, or around the
// writer) is read as stored.

// KeysBucket holds one data key per session (key = session id).
const KeysBucket = "SESSION_KEYS"

// HeaderSeal marks a sealed body; its value is the seal's version.
const HeaderSeal = "SL-Seal"

// SealVersion is the only seal: AES-256-GCM, nonce || ciphertext.
const SealVersion = "1"

// SealOverhead is how many bytes a seal adds to a body (the nonce and
// GCM's tag): usage counts bodies as written, before the seal.
const SealOverhead = sealNonceBytes + 16

const (
	sealKeyBytes   = 32
	sealNonceBytes = 12
	// DefaultKeyCacheSize is how many sessions' keys a store keeps.
	DefaultKeyCacheSize = 16384
)

// ErrKeyGone: a sealed body whose session key no longer exists (the
// session is erased, or being erased). It carries code erased.
var ErrKeyGone = &schema.Error{Code: schema.CodeErased, Message: "the session's key is destroyed: it is erased", Index: -1}

// Sealed reports whether m's body is sealed.
func Sealed(h nats.Header) bool { return h.Get(HeaderSeal) != "" }

func (s *Store) provisionKeys(ctx context.Context) error {
	_, err := s.provisionBucket(ctx, KeysBucket, "sessionlog: one data key per session, written once, securely deleted by an erase (docs/adr/011-sealed-bodies.md)", 0)
	return err
}

// sessionKey returns the session's cipher: from the cache, else read
// from the bucket's leader; with create, a session without a key gets
// one (Create: of two racing writers, the loser reads the winner's).
// Without create, a session without a key returns nil, nil.
func (s *Store) sessionKey(ctx context.Context, sessionID string, create bool) (cipher.AEAD, error) {
	if a, ok := s.keys.Get(sessionID); ok {
		return a, nil
	}
	key, err := s.readKey(ctx, sessionID)
	if err != nil {
		return nil, err
	}
	if key == nil && create {
		k := make([]byte, sealKeyBytes)
		if _, err := rand.Read(k); err != nil {
			return nil, err
		}
		kv, err := s.keysKV(ctx)
		if err != nil {
			return nil, err
		}
		if _, err = kv.Create(ctx, sessionID, k); err == nil {
			key = k
		} else if errors.Is(err, jetstream.ErrKeyExists) {
			if key, err = s.readKey(ctx, sessionID); err == nil && key == nil {
				err = errors.New("created by another, then gone")
			}
		}
		if err != nil {
			return nil, fmt.Errorf("logstore: key of %s: %w", sessionID, err)
		}
	}
	if key == nil {
		return nil, nil
	}
	a, err := newAEAD(key)
	if err != nil {
		return nil, fmt.Errorf("logstore: key of %s: %w", sessionID, err)
	}
	s.keys.Add(sessionID, a)
	return a, nil
}

func newAEAD(key []byte) (cipher.AEAD, error) {
	if len(key) != sealKeyBytes {
		return nil, fmt.Errorf("a key of %d bytes", len(key))
	}
	b, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(b)
}

// readKey reads the session's key from the bucket's leader (never by
// Direct Get: a replica behind it would say a key just made is missing);
// nil when it has none (never made, or destroyed by an erase).
func (s *Store) readKey(ctx context.Context, sessionID string) ([]byte, error) {
	m, err := s.msgGet(ctx, "KV_"+KeysBucket, msgGetRequest{LastFor: "$KV." + KeysBucket + "." + sessionID})
	if isStreamNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("logstore: key of %s: %w", sessionID, err)
	}
	if m == nil || m.Header.Get(headerKVOperation) != "" {
		return nil, nil
	}
	return m.Data, nil
}

func (s *Store) keysKV(ctx context.Context) (jetstream.KeyValue, error) {
	kv, err := s.keysBucket.open(ctx, s.js, KeysBucket)
	if err != nil {
		return nil, fmt.Errorf("logstore: bucket %s: %w (start a service that provisions it)", KeysBucket, err)
	}
	return kv, nil
}

// HasKey says whether the session has a data key in KeysBucket, read
// from the bucket's leader as a seal reads it; none is made, and the key
// read is not kept in this store's memory. A store that never sealed
// (no keys bucket) has none.
func (s *Store) HasKey(ctx context.Context, sessionID string) (bool, error) {
	if _, ok := s.keys.Get(sessionID); ok {
		return true, nil
	}
	key, err := s.readKey(ctx, sessionID)
	return key != nil, err
}

// ForgetKey drops the session's key from this store's memory (an erase
// destroyed it, or is about to).
func (s *Store) ForgetKey(sessionID string) { s.keys.Remove(sessionID) }

// sealed returns msgs (one session's events) as stored: each a copy
// whose body is sealed with the session's key, made here on its first
// write. msgs are left as they are (plain), and returned as they are
// unless the store seals bodies (Config.SealBodies).
func (s *Store) sealed(ctx context.Context, sessionID string, msgs []*nats.Msg) ([]*nats.Msg, error) {
	if !s.cfg.SealBodies || len(msgs) == 0 {
		return msgs, nil
	}
	a, err := s.sessionKey(ctx, sessionID, true)
	if err != nil {
		return nil, notCommitted(err)
	}
	out := make([]*nats.Msg, len(msgs))
	for i, m := range msgs {
		out[i] = sealMsg(a, m)
	}
	return out, nil
}

// sealMsg is m with its body sealed by a.
func sealMsg(a cipher.AEAD, m *nats.Msg) *nats.Msg {
	h := make(nats.Header, len(m.Header)+1)
	maps.Copy(h, m.Header)
	h[HeaderSeal] = []string{SealVersion}
	return &nats.Msg{Subject: m.Subject, Header: h, Data: sealBytes(a, "", m.Data, m.Header.Get(HeaderMsgID))}
}

// sealBytes is the seal of plain by a, bound to ad: prefix, a random
// nonce, then AES-256-GCM's ciphertext and tag. Bodies (no prefix, the
// message id as ad) and KV values (sealValue) are sealed here; openBody
// opens what follows the prefix.
func sealBytes(a cipher.AEAD, prefix string, plain []byte, ad string) []byte {
	n := len(prefix) + sealNonceBytes
	data := make([]byte, n, n+len(plain)+a.Overhead())
	copy(data, prefix)
	nonce := data[len(prefix):]
	_, _ = rand.Read(nonce)
	return a.Seal(data, nonce, plain, []byte(ad))
}

// open replaces a sealed m's body with the plain one. A sealed body whose
// key is gone is ErrKeyGone; one that does not open (changed in the
// store, or another seal) is unreadable: an *UnreadableError, as a body
// that does not decode is to a judge. m without a seal is left as is.
func (s *Store) open(ctx context.Context, m *Msg) error {
	v := m.Header.Get(HeaderSeal)
	if v == "" || m.Header.Get(nats.MsgSize) != "" {
		return nil // plain, or read headers only (no body)
	}
	id, ok := SessionFromSubject(m.Subject)
	if !ok {
		return schema.Errorf(schema.CodeUnreadable, "a sealed message on %s, which names no session", m.Subject)
	}
	if v != SealVersion {
		return schema.Errorf(schema.CodeUnreadable, "session %s: stream seq %d: seal %q is not known", id, m.StreamSeq, v)
	}
	a, err := s.sessionKey(ctx, id, false)
	if err != nil {
		return err
	}
	if a == nil {
		return ErrKeyGone
	}
	plain, err := openBody(a, m.Data, m.Header.Get(HeaderMsgID))
	if err != nil {
		// The judge's verdict on a body that is not an event (a reader that
		// judges says after which event: Judge.Judged, ReadJudged).
		got, _ := strconv.ParseUint(m.Header.Get(HeaderSeq), 10, 64)
		return &UnreadableError{SessionID: id, StreamSeq: m.StreamSeq, GotSeq: got, Kind: KindUnopened,
			Reason: fmt.Sprintf("the sealed body does not open: %v", err)}
	}
	m.Data = plain
	return nil
}

// openBody opens what sealBytes sealed (past its prefix) with the same ad.
func openBody(a cipher.AEAD, data []byte, ad string) ([]byte, error) {
	if len(data) < sealNonceBytes+a.Overhead() {
		return nil, errors.New("too short")
	}
	return a.Open(nil, data[:sealNonceBytes], data[sealNonceBytes:], []byte(ad))
}

// openFailed reports whether err is open's answer about a sealed body (its
// key gone, or it does not open): an answer about the stored message,
// which reading it again does not change.
func openFailed(err error) bool {
	return err != nil && (errors.Is(err, ErrKeyGone) || schema.CodeOf(err) == schema.CodeUnreadable)
}

// Open opens a message read around this store's reads (its body sealed:
// plain after). See open.
func (s *Store) Open(ctx context.Context, m *Msg) error { return s.open(ctx, m) }

// Seal seals m's plain body with its session's key, as this store's
// appends seal (m's header gets SL-Seal; the header's Nats-Msg-Id, or
// none, is the seal's associated data): for a message stored again
// around the writer, by a tool or a test that changes stored messages.
// The session must have a key (ErrKeyGone when it has none).
func (s *Store) Seal(ctx context.Context, m *Msg) error {
	id, ok := SessionFromSubject(m.Subject)
	if !ok {
		return fmt.Errorf("logstore: seal: %s names no session", m.Subject)
	}
	a, err := s.sessionKey(ctx, id, false)
	if err != nil {
		return err
	}
	if a == nil {
		return ErrKeyGone
	}
	sm := sealMsg(a, &nats.Msg{Subject: m.Subject, Header: m.Header, Data: m.Data})
	m.Header, m.Data = sm.Header, sm.Data
	return nil
}

// openAll opens each of msgs.
func (s *Store) openAll(ctx context.Context, msgs []*Msg) error {
	for _, m := range msgs {
		if err := s.open(ctx, m); err != nil {
			return err
		}
	}
	return nil
}

// Sealed KV values (DESIGN.md section 2, docs/adr/011-sealed-bodies.md,
// "KV values"). A store that seals bodies also seals the values of a
// session's lease (SESSION_LEASES), claim (SESSION_CLAIMS) and fork record
// (SESSION_FORKS, key = the child) with that session's key: those buckets
// keep one revision a key, and the server drops a replaced, expired or
// purged revision without overwriting it, so what stays of it in the block
// files once the erase destroyed the key is ciphertext. A sealed value is
// ValueSealPrefix, then sealBytes' nonce and ciphertext, with the key's
// subject ($KV.<bucket>.<key>) as associated data: a value copied under
// another key or bucket does not open. KV messages carry no header of
// ours (the KV API writes none), so the prefix marks the seal: a plain
// value is JSON, which never begins so. Every read in this package opens
// the values (openValue), so callers see the plain JSON whatever wrote it.

// ValueSealPrefix begins a sealed KV value.
const ValueSealPrefix = "SL-Seal " + SealVersion + "\n"

// valueAD is the associated data of bucket's key's sealed value.
func valueAD(bucket, key string) string { return "$KV." + bucket + "." + key }

// sealValue is value as this store writes it under bucket's key: sealed
// with the key's session key (made here on the session's first write)
// when the store seals, value itself when it does not.
func (s *Store) sealValue(ctx context.Context, bucket, key string, value []byte) ([]byte, error) {
	if !s.cfg.SealBodies {
		return value, nil
	}
	a, err := s.sessionKey(ctx, key, true)
	if err != nil {
		return nil, err
	}
	return sealBytes(a, ValueSealPrefix, value, valueAD(bucket, key)), nil
}

// openValue is the plain value of bucket's key as stored: value itself
// unless sealed. A sealed value whose key is gone is ErrKeyGone (the
// session is erased); one that does not open is unreadable.
func (s *Store) openValue(ctx context.Context, bucket, key string, value []byte) ([]byte, error) {
	sealed, ok := bytes.CutPrefix(value, []byte(ValueSealPrefix))
	if !ok {
		return value, nil
	}
	a, err := s.sessionKey(ctx, key, false)
	if err != nil {
		return nil, err
	}
	if a == nil {
		return nil, ErrKeyGone
	}
	plain, err := openBody(a, sealed, valueAD(bucket, key))
	if err != nil {
		return nil, schema.Errorf(schema.CodeUnreadable, "%s %s: the sealed value does not open: %v", bucket, key, err)
	}
	return plain, nil
}
