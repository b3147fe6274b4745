package main

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/sessionlog/sessionlog/internal/bench/sessiongen"
	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/natstest"
)

// `sessionlog tenants` counts each tenant's sessions and messages by their
// stored ids: _T<tenant>_<id>, every other id the default tenant's.
func TestTenantsVerb(t *testing.T) {
	s := natstest.RunServer(t)
	nc := natstest.Connect(t, s)
	ctx := context.Background()
	st, err := logstore.Open(ctx, nc, logstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	for id, n := range map[string]int{"s-1": 3, "_Tacme_s-1": 2, "_Tacme_s-2": 4, "_Tglobex_x": 1} {
		if _, err := sessiongen.Seed(ctx, st, id, n, 0); err != nil {
			t.Fatal(err)
		}
	}
	var out, errb bytes.Buffer
	if code := Main(ctx, []string{"tenants", "--json", "--nats-url", s.ClientURL()}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	counts := map[string]uint64{}
	for _, id := range []string{"s-1", "_Tacme_s-1", "_Tacme_s-2", "_Tglobex_x"} {
		tail, err := st.Tail(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		counts[id] = tail.Seq
	}
	want := strings.Join([]string{
		`{"tenant":"AGENTS","sessions":1,"messages":` + strconv.FormatUint(counts["s-1"], 10) + `}`,
		`{"tenant":"acme","sessions":2,"messages":` + strconv.FormatUint(counts["_Tacme_s-1"]+counts["_Tacme_s-2"], 10) + `}`,
		`{"tenant":"globex","sessions":1,"messages":` + strconv.FormatUint(counts["_Tglobex_x"], 10) + `}`,
	}, "\n") + "\n"
	if got := out.String(); got != want {
		t.Fatalf("tenants --json printed\n%s\nwant\n%s", got, want)
	}
	out.Reset()
	if code := Main(ctx, []string{"tenants", "--nats-url", s.ClientURL()}, &out, &errb); code != 0 || !strings.HasPrefix(out.String(), "TENANT") {
		t.Fatalf("tenants: exit %d: %q %s", code, out.String(), errb.String())
	}
}
