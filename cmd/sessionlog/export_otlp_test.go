package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"flag"
	"sort"
	"strings"
	"testing"

	"github.com/sessionlog/sessionlog/internal/assemble"
	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/internal/otelexport/otlptest"
	"github.com/sessionlog/sessionlog/internal/sessionfixture"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// `sessionlog export --to otlp` sends each ended turn of a session to an
// OTLP/HTTP receiver, with the same ids every time; a wrong command line
// is a usage error and sends nothing.
func TestExportOTLPVerb(t *testing.T) {
	s := natstest.RunServer(t)
	nc := natstest.Connect(t, s)
	ctx := context.Background()
	st, err := logstore.Open(ctx, nc, logstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	const id = "otlp-verb"
	for _, evs := range [][]schema.Envelope{sessionfixture.ParentEvents(), sessionfixture.Events(id)} {
		if _, err := st.Append(ctx, logstore.AppendRequest{SessionID: evs[0].SessionID, Events: evs}); err != nil {
			t.Fatal(err)
		}
	}
	rcv := otlptest.NewReceiver(t)
	export := func() []string {
		var out, errb bytes.Buffer
		if code := Main(ctx, []string{"export", "--to", "otlp", "--endpoint", rcv.URL, "--session", id, "--nats-url", s.ClientURL()}, &out, &errb); code != 0 {
			t.Fatalf("export: %d: %s", code, errb.String())
		}
		if !strings.Contains(errb.String(), "exported 1 sessions: 2 turns, 9 spans") || out.Len() != 0 {
			t.Errorf("stdout %q stderr %q", out.String(), errb.String())
		}
		var ids []string
		for _, sp := range rcv.Take() {
			ids = append(ids, sp.Name+"/"+hex.EncodeToString(sp.TraceId)+"/"+hex.EncodeToString(sp.SpanId)+"/"+hex.EncodeToString(sp.ParentSpanId))
		}
		sort.Strings(ids)
		return ids
	}
	first, second := export(), export()
	if len(first) != 9 || strings.Join(first, "\n") != strings.Join(second, "\n") {
		t.Errorf("two exports:\n%s\n---\n%s", strings.Join(first, "\n"), strings.Join(second, "\n"))
	}
	for _, args := range [][]string{
		{"export", "--to", "otlp"},
		{"export", "--endpoint", rcv.URL},
		{"export", "--to", "zipkin", "--endpoint", rcv.URL},
		{"export", "--to", "otlp", "--endpoint", "collector:4318"},
	} {
		var errb bytes.Buffer
		if code := Main(ctx, append(args, "--nats-url", s.ClientURL()), &bytes.Buffer{}, &errb); code != 2 {
			t.Errorf("%v: exit %d (%s), want 2", args, code, errb.String())
		}
	}
	if n := rcv.Count(); n != 0 {
		t.Errorf("bad command lines sent %d spans", n)
	}
}

// --otlp-endpoint reaches the projector's configuration, and an endpoint
// that is not an http(s) URL stops the projector from starting.
func TestOTLPEndpointFlag(t *testing.T) {
	fs := flag.NewFlagSet("projector", flag.ContinueOnError)
	cfg := projectorFlags(fs)
	if err := fs.Parse([]string{"--otlp-endpoint", "collector:4318", "--data-dir", t.TempDir()}); err != nil {
		t.Fatal(err)
	}
	if cfg.OTLPEndpoint != "collector:4318" {
		t.Fatalf("got %+v", *cfg)
	}
	s := natstest.RunServer(t)
	st, err := logstore.Open(context.Background(), natstest.Connect(t, s), logstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := assemble.NewProjector(*cfg, st, assemble.Deps{}); err == nil || !strings.Contains(err.Error(), "otlp endpoint") {
		t.Fatalf("NewProjector with a bad endpoint: %v", err)
	}
}
