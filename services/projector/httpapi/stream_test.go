package httpapi_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sessionlog/sessionlog/internal/gen"
	"github.com/sessionlog/sessionlog/internal/natstest"
	"github.com/sessionlog/sessionlog/services/projector"
	"github.com/sessionlog/sessionlog/services/projector/httpapi"
	"github.com/sessionlog/sessionlog/services/projector/internal/projectortest"
)

// TestStreamedAnswersEqualWhole: /context, /events and /export (its own
// format and an agent's) of a session many pages long, streamed a page at
// a time, are byte for byte what the projector built whole in memory
// before; with rewinds (one into what another abandoned) and a compaction.
func TestStreamedAnswersEqualWhole(t *testing.T) {
	e := projectortest.NewEnv(t)
	const pageBytes = 16 << 10
	r := e.Start(t.TempDir(), func(c *projector.Config) { c.Watch.PageBytes = pageBytes })
	r.WaitReady(t)
	for _, c := range []struct {
		id      string
		rewinds bool
	}{{"whole", false}, {"rewound", true}} {
		last, err := e.LS.PublishUnchecked(e.Ctx, gen.Chat(c.id, 400, 300, c.rewinds, projectortest.T0))
		if err != nil {
			t.Fatal(err)
		}
		_ = last
	}
	for _, id := range []string{"whole", "rewound"} {
		d := r.WaitSession(t, id, func(d httpapi.Detail) bool {
			if d.Problem != nil {
				t.Fatalf("%s: %+v", id, d.Problem)
			}
			return d.LastSeq > 2800 && d.Status == projector.StatusIdle
		})
		t.Run(id, func(t *testing.T) {
			if id == "rewound" && d.Rewinds == 0 {
				t.Fatalf("no rewinds folded: %+v", d.Summary)
			}
			// What ACP replay leaves out, by ranges, is what the whole
			// context followed in memory abandoned.
			byRanges, whole, err := projectortest.Abandoned(r, id)
			if err != nil {
				t.Fatal(err)
			}
			if id == "rewound" && len(whole) == 0 || !maps.Equal(byRanges, whole) {
				t.Fatalf("abandoned by ranges: %d seqs, by the whole context: %d (%v vs %v)", len(byRanges), len(whole), byRanges, whole)
			}
			check := func(path string, want []byte, err error) {
				t.Helper()
				if err != nil {
					t.Fatal(err)
				}
				code, got := r.Get(t, path)
				if code != 200 {
					t.Fatalf("GET %s: %d %s", path, code, got)
				}
				if len(got) < 4*pageBytes {
					t.Fatalf("GET %s: %d bytes, not pages enough to test", path, len(got))
				}
				if !bytes.Equal(got, want) {
					i := 0
					for i < min(len(got), len(want)) && got[i] == want[i] {
						i++
					}
					t.Fatalf("GET %s: %d bytes, want %d; first difference at byte %d: got %.80q, want %.80q", path, len(got), len(want), i, got[i:], want[i:])
				}
			}
			want, err := projectortest.WholeContext(r, id)
			check("/v1/sessions/"+id+"/context", want, err)
			want, err = projectortest.WholeEvents(e.Ctx, e.LS, id, 100, 1000)
			check("/v1/sessions/"+id+"/events?after=100&limit=1000", want, err)
			want, err = projectortest.WholeExport(e.Ctx, e.LS, id, "")
			check("/v1/sessions/"+id+"/export", want, err)
			for _, format := range []string{"claude-code", "codex", "pi"} {
				want, err = projectortest.WholeExport(e.Ctx, e.LS, id, format)
				check("/v1/sessions/"+id+"/export?format="+format, want, err)
			}
		})
	}
}

// sendLittle is a listener whose connections have a small send buffer:
// what the server writes to a client that does not read stays in the
// handler, not in the kernel.
type sendLittle struct{ net.Listener }

func (l sendLittle) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetWriteBuffer(16 << 10)
	}
	return c, err
}

// TestAnswerToAClientThatDoesNotReadIsCut: a client that asks for a
// streamed answer many pages long and reads nothing is cut off once a
// write waited for the write timeout (counted in
// sessionlog_projector_answers_cut_total): when it reads at last, the
// answer began (200) and its body ends short, never looking complete.
func TestAnswerToAClientThatDoesNotReadIsCut(t *testing.T) {
	e := projectortest.NewEnv(t)
	reg := prometheus.NewRegistry()
	r := e.Start(t.TempDir(), func(c *projector.Config) {
		c.Registerer = reg
		c.Watch.PageBytes = 16 << 10
		c.Watch.WriteTimeout = time.Second
	})
	r.WaitReady(t)
	const id = "unread"
	if _, err := e.LS.PublishUnchecked(e.Ctx, gen.Chat(id, 2000, 250, false, projectortest.T0)); err != nil {
		t.Fatal(err)
	}
	r.WaitSession(t, id, func(d httpapi.Detail) bool { return d.LastSeq >= 2000*8+1 && d.Status == projector.StatusIdle })
	srv := httptest.NewUnstartedServer(r.Handler())
	srv.Listener = sendLittle{srv.Listener}
	srv.Start()
	defer srv.Close()
	cut := func() float64 {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == "sessionlog_projector_answers_cut_total" {
				return mf.GetMetric()[0].GetCounter().GetValue()
			}
		}
		return 0
	}
	for i, path := range []string{"/context", "/events?limit=1000", "/export", "/export?format=claude-code"} {
		d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
			return rc.Control(func(fd uintptr) { syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 16<<10) })
		}}
		conn, err := d.DialContext(e.Ctx, "tcp", srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		fmt.Fprintf(conn, "GET /v1/sessions/%s%s HTTP/1.1\r\nHost: projector\r\n\r\n", id, path)
		natstest.CheckFor(t, 60*time.Second, 20*time.Millisecond, func() error {
			if got := cut(); got < float64(i+1) {
				return fmt.Errorf("%s: %v answers cut", path, got)
			}
			return nil
		})
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		n, err := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || err == nil {
			t.Fatalf("%s: status %d, %d bytes of body, then %v; want 200 and a body cut short", path, resp.StatusCode, n, err)
		}
		t.Logf("%s: cut after %d bytes of body: %v", path, n, err)
	}
}
