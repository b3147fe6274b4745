package opshttp

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestReadyzAggregates(t *testing.T) {
	o := New()
	fail := errors.New("catching up")
	var state error = fail
	o.AddReady("a", func() error { return nil })
	o.AddReady("b", func() error { return state })
	get := func() (int, map[string]any) {
		rec := httptest.NewRecorder()
		o.Mux.ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
		var body map[string]any
		_ = json.Unmarshal(rec.Body.Bytes(), &body)
		return rec.Code, body
	}
	if code, body := get(); code != http.StatusServiceUnavailable || body["checks"].(map[string]any)["b"] != "catching up" {
		t.Fatalf("%d %v", code, body)
	}
	state = nil
	if code, body := get(); code != http.StatusOK || body["status"] != "ok" {
		t.Fatalf("%d %v", code, body)
	}
}
