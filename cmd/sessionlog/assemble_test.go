package main

import (
	"flag"
	"io"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/sessionlog/sessionlog/internal/assemble"
)

// The standalone commands and `up` build each service with the same
// settings: a standalone command's flags default to assemble's Default
// configuration, which is what up passes (changing only --lease-ttl,
// --grace and --data-dir, its own flags).
func TestStandaloneDefaultsAreUps(t *testing.T) {
	parse := func(bind func(fs *flag.FlagSet) any) any {
		fs := flag.NewFlagSet("x", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		got := bind(fs)
		if err := fs.Parse(nil); err != nil {
			t.Fatal(err)
		}
		return got
	}
	for _, tc := range []struct {
		name      string
		got, want any
	}{
		{"writer", parse(func(fs *flag.FlagSet) any { return *writerFlags(fs) }), assemble.DefaultWriter()},
		{"repairer", parse(func(fs *flag.FlagSet) any { return *repairerFlags(fs) }), assemble.DefaultRepairer()},
		{"forker", parse(func(fs *flag.FlagSet) any { return *forkerFlags(fs) }), assemble.DefaultForker()},
		{"projector", parse(func(fs *flag.FlagSet) any { return *projectorFlags(fs) }),
			assemble.DefaultProjector(filepath.Join(defaultDataDir, "projector"))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !reflect.DeepEqual(tc.got, tc.want) {
				t.Errorf("standalone defaults %+v, up's %+v", tc.got, tc.want)
			}
		})
	}
	// up's own flags default to the same lease TTL and grace.
	if assemble.DefaultWriter().LeaseTTL != assemble.DefaultRepairer().LeaseTTL {
		t.Errorf("writer and repairer default lease TTLs differ")
	}
}

// A flag reaches the configuration the service is built from.
func TestServiceFlagsSetConfig(t *testing.T) {
	fs := flag.NewFlagSet("writer", flag.ContinueOnError)
	cfg := writerFlags(fs)
	if err := fs.Parse([]string{"--max-concurrent", "7", "--state-cache", "9"}); err != nil {
		t.Fatal(err)
	}
	if cfg.MaxConcurrent != 7 || cfg.StateCacheSize != 9 {
		t.Fatalf("got %+v", *cfg)
	}
}
