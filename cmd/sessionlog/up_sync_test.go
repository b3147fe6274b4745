package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// up fsyncs before every acknowledgement unless told otherwise: by
// --sync interval, or by a --nats-config that sets sync_interval.
func TestUpSync(t *testing.T) {
	conf := filepath.Join(t.TempDir(), "lazy.conf")
	if err := os.WriteFile(conf, []byte("jetstream { sync_interval: 30s }\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	plain := filepath.Join(t.TempDir(), "plain.conf")
	if err := os.WriteFile(plain, []byte("jetstream {}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name         string
		args         []string
		wantAlways   bool
		wantInterval time.Duration
	}{
		{"Default", nil, true, 0},
		{"Interval", []string{"--sync", "interval"}, false, 0},
		{"FileSaysNothing", []string{"--nats-config", plain}, true, 0},
		{"FileInterval", []string{"--nats-config", conf}, false, 30 * time.Second},
		{"FlagOverridesFile", []string{"--nats-config", conf, "--sync", "always"}, true, 30 * time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			fs := newFlags("up")
			var f upFlags
			fs.StringVar(&f.dataDir, "data-dir", t.TempDir(), "")
			fs.StringVar(&f.natsListen, "nats-listen", defaultNATSListen, "")
			fs.StringVar(&f.sync, "sync", defaultSync, "")
			fs.StringVar(&f.natsConfig, "nats-config", "", "")
			if err := parseFlagsEnv(fs, c.args, func(string) (string, bool) { return "", false }); err != nil {
				t.Fatal(err)
			}
			opts, _, err := upServerOptions(fs, &f)
			if err != nil {
				t.Fatal(err)
			}
			if opts.SyncAlways != c.wantAlways || opts.SyncInterval != c.wantInterval {
				t.Errorf("SyncAlways %v SyncInterval %s, want %v %s", opts.SyncAlways, opts.SyncInterval, c.wantAlways, c.wantInterval)
			}
			// up reports (and picks group commit by) what holds.
			if (f.sync == "always") != c.wantAlways {
				t.Errorf("--sync reads %q with SyncAlways %v", f.sync, opts.SyncAlways)
			}
		})
	}
}
