package main

import (
	"flag"
	"io"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/sessionlog/sessionlog/internal/assemble"
	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/services/eraser"
	"github.com/sessionlog/sessionlog/services/forker"
	"github.com/sessionlog/sessionlog/services/projector"
	"github.com/sessionlog/sessionlog/services/repairer"
	"github.com/sessionlog/sessionlog/services/source"
	"github.com/sessionlog/sessionlog/services/writer"
)

// The standalone commands and `up` build each service with the service's
// own defaults: with no flags given, every setting of the configuration
// `up` assembles and of a standalone command's flags is the one of the
// same name in the service's DefaultConfig (the lease TTL the store's
// default, the repairer's batches in flight left to the repairer, which
// sets them by the store's replicas, the projector's store in
// <--data-dir>/projector).
func TestFlagDefaultsAreTheServices(t *testing.T) {
	parse := func(bind func(fs *flag.FlagSet) any) any {
		fs := flag.NewFlagSet("x", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		got := bind(fs)
		if err := fs.Parse(nil); err != nil {
			t.Fatal(err)
		}
		return got
	}
	up := parse(func(fs *flag.FlagSet) any { return bindUpFlags(fs) }).(*upFlags).configs()
	lease := map[string]any{"LeaseTTL": logstore.DefaultLeaseTTL}
	repair := map[string]any{"LeaseTTL": logstore.DefaultLeaseTTL, "GroupInflight": 0}
	store := map[string]any{"DataDir": filepath.Join(defaultDataDir, "projector"), "OTLPEndpoint": ""}
	for _, tc := range []struct {
		name          string
		up, flags     any
		service, want any
		given         map[string]any
	}{
		{name: "writer", up: up.Writer, flags: *parse(func(fs *flag.FlagSet) any { return writerFlags(fs) }).(*assemble.Writer), service: writer.DefaultConfig(), given: lease},
		{name: "source", up: up.Source, flags: *parse(func(fs *flag.FlagSet) any { return sourceFlags(fs) }).(*assemble.Source), service: source.DefaultConfig()},
		{name: "repairer", up: up.Repairer, flags: *parse(func(fs *flag.FlagSet) any { return repairerFlags(fs) }).(*assemble.Repairer), service: repairer.DefaultConfig(), given: repair},
		{name: "eraser", up: up.Eraser, flags: *parse(func(fs *flag.FlagSet) any { return eraserFlags(fs) }).(*assemble.Eraser), service: eraser.DefaultConfig()},
		{name: "forker", up: up.Forker, flags: *parse(func(fs *flag.FlagSet) any { return forkerFlags(fs) }).(*assemble.Forker), service: forker.DefaultConfig()},
		{name: "projector", up: up.Projector, flags: *parse(func(fs *flag.FlagSet) any { return projectorFlags(fs) }).(*assemble.Projector), service: projector.DefaultConfig(), given: store},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sameAsService(t, "up", tc.up, tc.service, tc.given)
			sameAsService(t, "flags", tc.flags, tc.service, tc.given)
		})
	}
}

// sameAsService fails t for each field of cfg, an assembled
// configuration, whose value is not the one of the same name in svc, the
// service's DefaultConfig, or given[name] for a setting the service leaves
// to the store or the command. The fields of a struct cfg embeds (the
// projector's Config) are cfg's.
func sameAsService(t *testing.T, what string, cfg, svc any, given map[string]any) {
	t.Helper()
	cv, sv := reflect.ValueOf(cfg), reflect.ValueOf(svc)
	for i := range cv.NumField() {
		name := cv.Type().Field(i).Name
		if cv.Type().Field(i).Anonymous {
			sameAsService(t, what, cv.Field(i).Interface(), svc, given)
			continue
		}
		want, ok := given[name]
		if !ok {
			f := sv.FieldByName(name)
			if !f.IsValid() {
				t.Errorf("%s: %s is no setting of the service's Config", what, name)
				continue
			}
			want = f.Interface()
		}
		got := cv.Field(i).Interface()
		if g, w := reflect.ValueOf(got), reflect.ValueOf(want); g.Kind() == reflect.Map && g.Len() == 0 && w.Len() == 0 {
			continue // no tokens, nil or empty
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %s is %v (%T), the service's default %v (%T)", what, name, got, got, want, want)
		}
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
