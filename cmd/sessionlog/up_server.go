package main

// The embedded nats-server of `sessionlog up`: its options (from the flags
// and --nats-config) and the addresses up shows; internal/embednats starts
// it.

import (
	"flag"
	"fmt"
	"net"
	"path/filepath"
	"regexp"
	"strconv"

	"github.com/nats-io/nats-server/v2/server"
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
		if opts, err = server.ProcessConfigFile(f.natsConfig); err != nil {
			return nil, nil, configError(f.natsConfig, err)
		}
	}
	if !fromFile || flagGiven(fs, "nats-listen") || (opts.Host == "" && opts.Port == 0) {
		host, port, err := splitHostPort(f.natsListen)
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
	if svc == nil && !loopbackHost(opts.Host) {
		return nil, nil, usageErrorf("NATS would listen on %q with no credentials: give agents a user (--nats-user/--nats-password) or listen on loopback (--nats-listen 127.0.0.1:4222)", opts.Host)
	}
	return opts, svc, nil
}

// loopbackHost: an address only this host can reach.
func loopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// missingVar finds the variable nats-server's parser could not resolve.
var missingVar = regexp.MustCompile(`variable reference for '([^']+)'`)

// configError names the environment variable a config references but the
// environment lacks (nats-server reports it only as a parse error).
func configError(path string, err error) error {
	if m := missingVar.FindStringSubmatch(err.Error()); m != nil {
		return fmt.Errorf("--nats-config %s: environment variable %s is not set; the config references it (%v)", path, m[1], err)
	}
	return fmt.Errorf("--nats-config %s: %w", path, err)
}

func clientURL(ns *server.Server) string {
	if a, ok := ns.Addr().(*net.TCPAddr); ok {
		return "nats://" + displayAddr(a)
	}
	return ns.ClientURL()
}

// displayAddr turns a wildcard bind address into one a browser can open.
func displayAddr(a net.Addr) string {
	tcp, ok := a.(*net.TCPAddr)
	if !ok {
		return a.String()
	}
	host := tcp.IP.String()
	if tcp.IP == nil || tcp.IP.IsUnspecified() {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, strconv.Itoa(tcp.Port))
}

func splitHostPort(addr string) (string, int, error) {
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("bad port %q", p)
	}
	return h, port, nil
}
