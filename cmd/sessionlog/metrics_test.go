package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/internal/version"
)

// freeAddr is a loopback address no one listens on (just now).
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// --metrics-listen serves /metrics, /healthz and /readyz without the
// token the API listener asks for, and nothing else: a Prometheus scrape
// needs no API token, and the token still guards the API.
func TestMetricsListenNeedsNoToken(t *testing.T) {
	s := natstest.RunServer(t)
	api, metrics := freeAddr(t), freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	var errb syncBuffer // written by the projector's log while read here
	go func() {
		done <- Main(ctx, []string{"projector", "--nats-url", s.ClientURL(), "--http-listen", api, "--metrics-listen", metrics,
			"--http-token", "s3cret", "--data-dir", t.TempDir()}, io.Discard, &errb)
	}()
	defer func() { cancel(); <-done }()
	get := func(url string) int {
		resp, err := http.Get(url)
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	natstest.CheckFor(t, 20*time.Second, 50*time.Millisecond, func() error {
		if code := get("http://" + metrics + "/readyz"); code != 200 {
			return fmt.Errorf("metrics readyz %d (%s)", code, errb.String())
		}
		return nil
	})
	for path, want := range map[string]int{"/metrics": 200, "/healthz": 200, "/v1/sessions": 404, "/": 404} {
		if code := get("http://" + metrics + path); code != want {
			t.Errorf("metrics listener %s: %d, want %d", path, code, want)
		}
	}
	if code := get("http://" + api + "/metrics"); code != 401 {
		t.Errorf("API listener /metrics without the token: %d, want 401", code)
	}
	resp, err := http.Get("http://" + metrics + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), "go_goroutines") {
		t.Errorf("/metrics lacks the Go collector:\n%.300s", b)
	}
	if !strings.Contains(string(b), `sessionlog_build_info{goversion="go`) || !strings.Contains(string(b), `version="`+version.Release+`"} 1`) {
		t.Errorf("/metrics lacks sessionlog_build_info with the release %s", version.Release)
	}
}
