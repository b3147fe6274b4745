package main

// The embedded nats-server of `sessionlog up`: its options (from the flags
// and --nats-config); internal/embednats starts it and shows its
// addresses.

import (
	"flag"
	"path/filepath"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/sessionlog/sessionlog/internal/embednats"
)

const (
	// The server allows 50 open atomic batches per stream by default; one
	// process with several services and clients opens more than that under
	// load, and a refused batch is only a retry, so allow more.
	upMaxBatchInflightPerStream = 1000
	upMaxBatchInflightTotal     = 4000
)

// upServerOptions builds the embedded server's options: --nats-config if
// given, then the flags. A flag overrides the file only when it was given
// (on the command line or by its variable); otherwise the file's value, or
// the default, holds.
func upServerOptions(fs *flag.FlagSet, f *upFlags) (*server.Options, *server.User, error) {
	opts := &server.Options{}
	fromFile := f.natsConfig != ""
	if fromFile {
		var err error
		if opts, err = embednats.ConfigFile(f.natsConfig); err != nil {
			return nil, nil, err
		}
	}
	if !fromFile || flagGiven(fs, "nats-listen") || (opts.Host == "" && opts.Port == 0) {
		host, port, err := embednats.SplitHostPort(f.natsListen)
		if err != nil {
			return nil, nil, usageErrorf("--nats-listen %q: %v", f.natsListen, err)
		}
		if port == 0 {
			port = server.RANDOM_PORT // 0 means 4222 to nats-server
		}
		opts.Host, opts.Port = host, port
	}
	if !fromFile || flagGiven(fs, "data-dir") || opts.StoreDir == "" {
		opts.StoreDir = filepath.Join(f.dataDir, "nats")
	}
	if opts.ServerName == "" {
		opts.ServerName = "sessionlog"
	}
	opts.JetStream = true
	// up handles signals itself and shuts the server down last.
	opts.NoSigs = true
	// --sync, unless a --nats-config that sets sync_interval holds and the
	// flag was not given: a file that says nothing gets the fsync before
	// every acknowledgement, not the server's lazy default.
	if !fromFile || flagGiven(fs, "sync") || (!opts.SyncAlways && opts.SyncInterval == 0) {
		opts.SyncAlways = f.sync == "always"
	} else if !opts.SyncAlways {
		f.sync = "interval" // the file's, as up reports it
	}
	if opts.JetStreamLimits.MaxBatchInflightPerStream == 0 {
		opts.JetStreamLimits.MaxBatchInflightPerStream = upMaxBatchInflightPerStream
	}
	if opts.JetStreamLimits.MaxBatchInflightTotal == 0 {
		opts.JetStreamLimits.MaxBatchInflightTotal = upMaxBatchInflightTotal
	}
	svc, err := upUsers(opts, f, fromFile)
	if err != nil {
		return nil, nil, err
	}
	if svc == nil && !embednats.Loopback(opts.Host) {
		return nil, nil, usageErrorf("NATS would listen on %q with no credentials: give agents a user (--nats-user/--nats-password) or listen on loopback (--nats-listen 127.0.0.1:4222)", opts.Host)
	}
	return opts, svc, nil
}
