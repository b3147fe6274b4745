package httpapi

import (
	"bytes"
	"encoding/json"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Answers of a session's size (/context, /events, /export) are streamed:
// the handler reads the session a page at a time and writes each page to
// a streamer, which holds at most one page (WatchLimits.PageBytes) for the
// client. So one request holds a page it read and a page it writes,
// whatever the session's length, and a client that reads nothing is cut
// off after WatchLimits.WriteTimeout, as a slow watcher is (ACP replay
// writes as the watch does, each write under the same timeout).
//
// The first page decides the status: an answer that fits in it (or fails
// within it) goes out whole, as it always did, with its status and error
// body. Past it the streamer sends 200 and the rest as it comes; a failure
// after that aborts the response, so the client sees a body cut short (a
// chunked body without its end), never one that looks complete.

// streamer writes one streamed answer (see above).
type streamer struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	header  http.Header // set on the response when it starts
	limit   int
	timeout time.Duration
	buf     bytes.Buffer
	started bool
	err     error // the first write to the client that failed
	cut     prometheus.Counter
}

// stream starts a streamed answer with header (Content-Type and the like);
// nothing goes to the client before the first page is full or end.
func (s *Server) stream(w http.ResponseWriter, header http.Header) *streamer {
	return &streamer{w: w, rc: http.NewResponseController(w), header: header,
		limit: s.watch.lim.PageBytes, timeout: s.watch.lim.WriteTimeout, cut: s.met.cut}
}

// Write holds p; a full page goes to the client.
func (st *streamer) Write(p []byte) (int, error) {
	if st.err != nil {
		return 0, st.err
	}
	st.buf.Write(p)
	if st.buf.Len() >= st.limit {
		if err := st.flush(); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// flush sends what is held, starting the response if it has not begun:
// one write, bounded by the write timeout.
func (st *streamer) flush() error {
	if st.err != nil {
		return st.err
	}
	if !st.started {
		st.setHeader()
		st.w.WriteHeader(http.StatusOK)
		st.started = true
	}
	st.rc.SetWriteDeadline(time.Now().Add(st.timeout))
	_, err := st.w.Write(st.buf.Bytes())
	if err == nil {
		err = st.rc.Flush()
	}
	st.buf.Reset()
	if err != nil {
		st.err = err
		st.cut.Inc()
	}
	return err
}

func (st *streamer) setHeader() {
	h := st.w.Header()
	for k, v := range st.header {
		h[k] = v
	}
}

// end sends the rest of the answer. The write deadline stays set: it also
// bounds the end of the chunked body that net/http writes after the
// handler returns (and which clears the deadline then).
func (st *streamer) end() error {
	if !st.started {
		st.setHeader()
		st.rc.SetWriteDeadline(time.Now().Add(st.timeout))
		_, err := st.w.Write(st.buf.Bytes())
		st.buf.Reset()
		return err
	}
	return st.flush()
}

// fail answers a failure: with answer (a status and an error body) while
// nothing went to the client, else by cutting the response short: net/http
// closes the connection without ending the chunked body, so the client
// sees a body cut short, never one that looks complete.
func (st *streamer) fail(answer func()) {
	if st.started {
		if st.err == nil {
			st.cut.Inc()
		}
		panic(http.ErrAbortHandler)
	}
	st.buf.Reset()
	answer()
}

// jsonHeader is the header of a JSON answer (writeJSON's).
func jsonHeader() http.Header {
	return http.Header{"Content-Type": {"application/json"}, "Cache-Control": {"no-store"}}
}

// encodeJSON appends v as json.Encoder writes it (HTML characters
// escaped), without the newline: a streamed JSON answer writes each member
// and element as writeJSON would have written it in the whole value.
func encodeJSON(dst *bytes.Buffer, v any) error {
	n := dst.Len()
	if err := json.NewEncoder(dst).Encode(v); err != nil {
		dst.Truncate(n)
		return err
	}
	dst.Truncate(dst.Len() - 1)
	return nil
}
