// Package storewatch keeps `sessionlog up` answering when the disk under
// its embedded nats-server fills. When a write of the server's store fails
// (ENOSPC), the server leaves the message unanswered and keeps that
// stream's error for as long as the stream is open: every later write to it
// fails the same way, so without help appends hang to a timeout
// (outcome_unknown) until a restart, and the server stays "ready". A Watch
// sees the error in the server's health, and its Err, given to /readyz as a
// check and to the log store as its CannotStore, makes /readyz say not
// ready with the reason and has the log store refuse appends at once
// (not_committed: nothing stored); once a probe write succeeds (space was
// freed) it restarts JetStream in the running process, which reopens the
// streams from their files (what was acknowledged was fsynced before), and
// appends succeed again.
package storewatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

const (
	// every is how often the watch reads the server's health, and, while
	// the store cannot write, tries the probe write.
	every = 500 * time.Millisecond
	// probeBytes is the probe write: room for it means room for appends
	// again.
	probeBytes = 1 << 20
)

// Watch watches an embedded server's store for write errors.
type Watch struct {
	ns    *server.Server
	opts  *server.Options
	probe string // the probe file, in the data directory
	log   *slog.Logger

	mu  sync.Mutex
	err error // why the store cannot write; nil when it can
}

// New returns a watch of ns, started with opts, whose store is under
// dataDir (the probe file is written there). It watches once Run runs.
func New(ns *server.Server, opts *server.Options, dataDir string, log *slog.Logger) *Watch {
	return &Watch{ns: ns, opts: opts, probe: filepath.Join(dataDir, ".sessionlog-space-probe"), log: log}
}

// Err says why the store cannot take writes now, nil if it can: /readyz's
// "store" check, and the log store's CannotStore.
func (w *Watch) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

func (w *Watch) set(err error) {
	w.mu.Lock()
	w.err = err
	w.mu.Unlock()
}

// Run watches until ctx ends.
func (w *Watch) Run(ctx context.Context) error {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			w.tick()
		}
	}
}

// tick reads the server's health; while the store cannot write, it tries
// the probe, and restarts JetStream once it succeeds.
func (w *Watch) tick() {
	if w.Err() == nil {
		if werr := w.writeErr(); werr != "" {
			w.set(fmt.Errorf("the store cannot write (%s); appends are refused until space is freed", werr))
			w.log.Error("the store cannot write: appends are refused (not_committed) until space is freed", "err", werr)
		}
		return
	}
	if err := w.probeWrite(); err != nil {
		return
	}
	w.log.Warn("space is free again: restarting JetStream to reopen the streams")
	if err := w.restartJetStream(); err != nil {
		w.log.Error("restart JetStream", "err", err)
		return
	}
	if werr := w.writeErr(); werr != "" {
		w.set(fmt.Errorf("the store cannot write (%s); appends are refused until space is freed", werr))
		return
	}
	w.set(nil)
	w.log.Warn("the store takes writes again")
}

// writeErr is the first stream write error the server's health names
// (empty when none): what a failed write leaves on a stream.
func (w *Watch) writeErr() string {
	hs := w.ns.Healthz(&server.HealthzOptions{Details: true})
	for _, e := range hs.Errors {
		if strings.Contains(e.Error, "write error") {
			return e.Error
		}
	}
	return ""
}

// probeWrite writes, syncs and removes a probe file next to the store.
func (w *Watch) probeWrite() error {
	f, err := os.OpenFile(w.probe, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(make([]byte, probeBytes))
	err = errors.Join(err, f.Sync(), f.Close())
	return errors.Join(err, os.Remove(w.probe))
}

// restartJetStream stops JetStream (the streams close their files, with
// their write errors) and starts it again from the store directory, as a
// configuration reload that turns it off and on does. The race detector
// flags that path in nats-server v2.15.3 itself: EnableJetStream replaces
// the JetStream API request queues (jetstream_api.go:1114-1115) without
// the server's lock while a client's API request may be loading one
// (:1028, :1031) and pushing to it (ipqueue.go:116-137 against the new
// queue's fields, :88); e2e/faults knows these reports by their stacks.
// At worst an API request sent during the restart goes unanswered, which
// every caller already takes as an unknown outcome or a timeout to retry.
func (w *Watch) restartJetStream() error {
	if err := w.ns.ShutdownJetStream(); err != nil {
		return err
	}
	o := w.opts
	return w.ns.EnableJetStream(&server.JetStreamConfig{
		StoreDir: o.StoreDir, SyncInterval: o.SyncInterval, SyncAlways: o.SyncAlways,
		MaxMemory: o.JetStreamMaxMemory, MaxStore: o.JetStreamMaxStore, Domain: o.JetStreamDomain,
		Strict: !o.NoJetStreamStrict,
	})
}
