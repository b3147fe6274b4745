package transfer

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/sessionlog/sessionlog/internal/sre"
	"github.com/sessionlog/sessionlog/pkg/agentlog"
	"github.com/sessionlog/sessionlog/pkg/client"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// The export of a user that may not read the log (an agent's): each
// session read through the writer's read API (sessions.api.read, DESIGN.md
// section 12) twice, a page at a time (readTwice), so that a session of
// any length is exported in the memory of a few pages.

// ExportRead writes the sessions ids, read through the writer's read API
// (sessions.api.read, which an agent may use: DESIGN.md section 12), as
// Export writes them: JSON lines, one stored envelope per line as the
// read API gives it (as stored: a tenant's session under
// _T<tenant>_<id>), sessions one after another, each read twice
// (readTwice) and written as its second read reads it. A session the
// read API answers unreadable is not written, said on stderr and named in
// the error; when listed is set (ids are what sessions.api.list gave), one
// erased since it was listed is not written either, said on stderr and
// counted in the summary, and is no error. Any other refusal ends the
// export; so does a session that changed or was erased between its two
// reads, after the lines of its second read written so far (its first
// events as the second read gave them, each line whole), all of which end
// up on stdout.
func ExportRead(ctx context.Context, cl *client.Client, ids []string, listed bool, stdout, stderr io.Writer) error {
	w := bufio.NewWriterSize(stdout, 1<<20)
	x := readExport{ctx: ctx, cl: cl, listed: listed, exportTally: exportTally{stderr: stderr}}
	var events int
	for _, id := range ids {
		_, err := x.session(id, func(raw json.RawMessage, _ *schema.Envelope) error {
			events++
			return sre.WriteLine(w, raw)
		})
		if err != nil {
			return errors.Join(err, w.Flush())
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "exported %d sessions, %d events%s\n", x.exported, events, x.leftOut())
	return notExported(x.skipped)
}

// ExportOTLPRead is ExportOTLP for a user that may not read the log (an
// agent's): each session read through the writer's read API twice
// (readTwice: the second read sends its turns as it reads), its spans
// named by the stored events as ExportOTLP names them; the sessions left
// out are ExportRead's.
func ExportOTLPRead(ctx context.Context, cl *client.Client, ids []string, listed bool, exp sdktrace.SpanExporter, endpoint string, stderr io.Writer) error {
	x := readExport{ctx: ctx, cl: cl, listed: listed, exportTally: exportTally{stderr: stderr}}
	turns, spans, err := sendOTLP(ctx, ids, exp, x.session)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "exported %d sessions: %d turns, %d spans to %s%s\n", x.exported, turns, spans, endpoint, x.leftOut())
	return notExported(x.skipped)
}

// readExport is what ExportRead and ExportOTLPRead share: the sessions
// exported, and those left out.
type readExport struct {
	ctx    context.Context
	cl     *client.Client
	listed bool // the ids are sessions.api.list's
	exportTally
	erased int // listed and erased before their read
}

// session gives fn the events of session id (readTwice) and says whether
// it did. A session left out (unreadable, or listed and erased since) is
// said on stderr and counted, and is no error; fn was then given none of
// it.
func (x *readExport) session(id string, fn func(json.RawMessage, *schema.Envelope) error) (bool, error) {
	return x.tally(readTwice(x.ctx, x.cl, id, fn), func(err error) bool {
		switch {
		case errors.Is(err, client.ErrUnreadable):
			fmt.Fprintf(x.stderr, "session %s not exported: %v\n", id, err)
			x.skipped = append(x.skipped, id)
		case x.listed && errors.Is(err, client.ErrErased):
			fmt.Fprintf(x.stderr, "session %s not exported: erased since it was listed\n", id)
			x.erased++
		default:
			return false
		}
		return true
	})
}

// exportTally counts the sessions of an export: those exported, and
// those left out that name themselves in its error.
type exportTally struct {
	stderr   io.Writer
	skipped  []string // named in the error
	exported int      // read to their end
}

// tally says what err, the error of the two reads (twice) of a session,
// makes of it: nil, a session exported (true); leftOut(err), one left
// out, no error (leftOut says it and counts it); a *rereadError or any
// other error ends the export.
func (t *exportTally) tally(err error, leftOut func(error) bool) (bool, error) {
	var re *rereadError
	switch {
	case err == nil:
		t.exported++
		return true, nil
	case errors.As(err, &re):
		return false, err
	case leftOut(err):
		return false, nil
	}
	return false, err
}

// leftOut is the summary's word on the sessions erased since the list.
func (x *readExport) leftOut() string {
	if x.erased == 0 {
		return ""
	}
	return fmt.Sprintf(" (%d sessions erased since they were listed left out)", x.erased)
}

// readTwice gives fn each stored event of session id, read through the
// writer a page at a time, twice, holding no more than a page of it. The
// first read judges the session whole: every page the read API serves
// answers what its judge reading the session from its start answers
// (DESIGN.md section 12), so a session that cannot be read to its end
// fails there, before fn is given any of it; of its events that read
// keeps only their number, the last seq and a digest of their stored
// bytes. The second read gives fn each event up to that seq as it reads
// it (the events appended since are not the session the first read
// judged); a session the first read found in one page is given from that
// page, which is not read again. An error of the first read is the read API's; any error of the
// second (the session erased or changed between the two reads, the read
// failing, fn failing), or a second read that does not give what the first
// did, is a *rereadError, after fn was given part of the session, or all
// of it as the second read gave it.
func readTwice(ctx context.Context, cl *client.Client, id string, fn func(json.RawMessage, *schema.Envelope) error) error {
	p := readPages{ctx: ctx, cl: cl, id: id}
	return twice(id, func(first *readDigest, fn func(json.RawMessage, *schema.Envelope) error) error {
		switch {
		case first == nil:
			return p.each(fn)
		case p.pages == 1:
			// One page held the whole session: its events are given
			// from that page, not read again.
			p.at = 0
			return agentlog.EachStored(0, func(uint64) ([]json.RawMessage, bool, error) { return p.page, false, nil }, func(e schema.Envelope) error {
				return fn(p.take(), &e)
			})
		}
		again := readPages{ctx: ctx, cl: cl, id: id, upTo: first.last}
		return again.each(fn)
	}, fn)
}

// twice is the mechanism of readTwice and of the operator's export
// (storeRead), over read, a reader of session id: read(nil, fn) reads the
// session whole, judging it, and gives fn each of its events; read(first,
// fn) reads it again up to first.last, the seq where the first read
// ended. The first read keeps only a readDigest; the second gives fn each
// event as it reads it. An error of the first read is read's; any error of
// the second, or a second read that does not give what the first did, is
// a *rereadError.
func twice(id string, read func(first *readDigest, fn func(json.RawMessage, *schema.Envelope) error) error, fn func(json.RawMessage, *schema.Envelope) error) error {
	var first readDigest
	if err := read(nil, first.add); err != nil {
		return err
	}
	var second readDigest
	err := read(&first, func(raw json.RawMessage, e *schema.Envelope) error {
		second.add(raw, e)
		return fn(raw, e)
	})
	if err == nil && !second.same(&first) {
		err = errors.New("it gave other events than the first read: the session changed between the two")
	}
	if err != nil {
		return &rereadError{id: id, first: first, given: second.n, err: err}
	}
	return nil
}

// readDigest is what a read of readTwice keeps of a session: how many
// events, the last seq, and a digest of their stored bytes.
type readDigest struct {
	n    int
	last uint64
	h    hash.Hash
}

func (d *readDigest) add(raw json.RawMessage, e *schema.Envelope) error {
	if d.h == nil {
		d.h = sha256.New()
	}
	d.h.Write(binary.BigEndian.AppendUint64(nil, uint64(len(raw))))
	d.h.Write(raw)
	d.n++
	d.last = e.Seq
	return nil
}

// same says whether d read what o read.
func (d *readDigest) same(o *readDigest) bool {
	return d.n == o.n && d.last == o.last && (d.n == 0 || string(d.h.Sum(nil)) == string(o.h.Sum(nil)))
}

// rereadError is a session whose second read (readTwice) failed, or gave
// other events than its first: what was made of the events it gave before
// (written, sent) is a part of the session, or the whole as it read it.
type rereadError struct {
	id    string
	first readDigest
	given int // the events the second read gave
	err   error
}

func (e *rereadError) Error() string {
	return fmt.Sprintf("session %s: its second read, which the export writes or sends as it reads, stopped after %d of the %d events (to seq %d) its first read judged whole: %v",
		e.id, e.given, e.first.n, e.first.last, e.err)
}

func (e *rereadError) Unwrap() error { return e.err }

// each calls fn with each stored event of the session, read through the
// writer a page at a time, as stored and decoded, up to seq p.upTo (0: to
// the session's end); a session without events is not found.
func (p *readPages) each(fn func(json.RawMessage, *schema.Envelope) error) error {
	err := agentlog.EachStored(0, p.next, func(e schema.Envelope) error {
		// EachStored gives the page's events in order, each once.
		return fn(p.take(), &e)
	})
	return p.end(err)
}
