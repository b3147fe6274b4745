package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sessionlog/sessionlog/internal/natstest"
)

// With sessionlog projector --http-token, a dashboard action takes the
// token only from the Authorization header, as in up: the listener's own
// check once let a cookie or ?token= through, and the action check did
// not know the token, so any of them could act.
func TestProjectorActionTakesTokenOnlyFromAuthorization(t *testing.T) {
	const token = "s3cret"
	s := natstest.RunServer(t)
	api := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		done <- Main(ctx, []string{"projector", "--nats-url", s.ClientURL(), "--http-listen", api, "--http-token", token, "--data-dir", t.TempDir()}, io.Discard, io.Discard)
	}()
	defer func() { cancel(); <-done }()
	natstest.CheckFor(t, 20*time.Second, 50*time.Millisecond, func() error {
		resp, err := http.Get("http://" + api + "/readyz")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return fmt.Errorf("readyz %d", resp.StatusCode)
		}
		return nil
	})
	act := func(query string, set func(h http.Header)) int {
		req, _ := http.NewRequest("POST", "http://"+api+"/v1/sessions/tok-1/resume"+query, strings.NewReader(`{}`))
		req.Header.Set("X-Sessionlog-Action", "1")
		set(req.Header)
		resp, err := (&http.Client{Timeout: 90 * time.Second}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	none := func(http.Header) {}
	for name, got := range map[string]int{
		"Cookie":         act("", func(h http.Header) { h.Set("Cookie", "sessionlog_token="+token) }),
		"?token=":        act("?token="+token, none),
		"?access_token=": act("?access_token="+token, none),
	} {
		if got != http.StatusUnauthorized {
			t.Errorf("an action with the token in %s: status %d, want 401", name, got)
		}
	}
	if got := act("", func(h http.Header) { h.Set("Authorization", "Bearer "+token) }); got == http.StatusUnauthorized || got == http.StatusForbidden {
		t.Errorf("an action with the token in Authorization: status %d, want it to run", got)
	}
}
