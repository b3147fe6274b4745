// Package otlptest is an OTLP/HTTP trace receiver for tests: it decodes
// the protobuf wire format of what an exporter sends, as a collector does.
package otlptest

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// Receiver takes POST /v1/traces (application/x-protobuf) and keeps the
// spans; every resource must be service.name=sessionlog.
type Receiver struct {
	*httptest.Server
	mu    sync.Mutex
	spans []*tracepb.Span
	sizes []int // spans per request
	// held and release, when set, hold the next request (Hold).
	held, release chan struct{}
}

// NewReceiver starts a receiver, closed when the test ends.
func NewReceiver(t testing.TB) *Receiver {
	r := &Receiver{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path != "/v1/traces" || req.Header.Get("Content-Type") != "application/x-protobuf" {
			t.Errorf("receiver: %s %s %s", req.Method, req.URL.Path, req.Header.Get("Content-Type"))
			http.Error(w, "no", http.StatusNotFound)
			return
		}
		r.mu.Lock()
		held, release := r.held, r.release
		r.held, r.release = nil, nil
		r.mu.Unlock()
		if held != nil {
			close(held)
			<-release
		}
		b, _ := io.ReadAll(req.Body)
		var msg coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(b, &msg); err != nil {
			t.Errorf("receiver: %v", err)
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var got []*tracepb.Span
		for _, rs := range msg.ResourceSpans {
			name := ""
			for _, kv := range rs.GetResource().GetAttributes() {
				if kv.Key == "service.name" {
					name = kv.Value.GetStringValue()
				}
			}
			if name != "sessionlog" {
				t.Errorf("receiver: service.name %q", name)
			}
			for _, ss := range rs.ScopeSpans {
				got = append(got, ss.Spans...)
			}
		}
		r.mu.Lock()
		r.spans = append(r.spans, got...)
		r.sizes = append(r.sizes, len(got))
		r.mu.Unlock()
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(out)
	}))
	t.Cleanup(r.Close)
	return r
}

// Hold makes the next request wait until release is called (at the
// latest when the test ends); held is closed when that request has come.
func (r *Receiver) Hold(t testing.TB) (held <-chan struct{}, release func()) {
	h, rel := make(chan struct{}), make(chan struct{})
	r.mu.Lock()
	r.held, r.release = h, rel
	r.mu.Unlock()
	var once sync.Once
	release = func() { once.Do(func() { close(rel) }) }
	t.Cleanup(release)
	return h, release
}

// Take returns the spans received so far and forgets them.
func (r *Receiver) Take() []*tracepb.Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.spans
	r.spans = nil
	return out
}

// Count is how many spans wait to be taken.
func (r *Receiver) Count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.spans)
}

// Requests returns the number of spans of each request received so far,
// and forgets them.
func (r *Receiver) Requests() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.sizes
	r.sizes = nil
	return out
}
