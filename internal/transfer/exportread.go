package transfer

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"strings"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/sessionlog/sessionlog/pkg/agentlog"
	"github.com/sessionlog/sessionlog/pkg/api"
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
// counted in the summary, and is no error. A session erased during its
// export is left out as Export leaves it out (exportSession), the read
// API's erased answer saying it was erased. Any other refusal ends the
// export; so does a session that changed between its two reads, after
// the lines of its second read written so far (its first events as the
// second read gave them, each line whole), all of which end up on stdout.
func ExportRead(ctx context.Context, cl *client.Client, ids []string, listed bool, stdout, stderr io.Writer) error {
	x := &readExport{ctx: ctx, cl: cl, listed: listed, exportTally: exportTally{stderr: stderr}}
	return exportLines(x, &x.exportTally, ids, stdout)
}

// ExportOTLPRead is ExportOTLP for a user that may not read the log (an
// agent's): each session read through the writer's read API twice
// (readTwice: the second read sends its turns as it reads), its spans
// named by the stored events as ExportOTLP names them; the sessions left
// out are ExportRead's.
func ExportOTLPRead(ctx context.Context, cl *client.Client, ids []string, listed bool, exp sdktrace.SpanExporter, endpoint string, stderr io.Writer) error {
	x := &readExport{ctx: ctx, cl: cl, listed: listed, exportTally: exportTally{stderr: stderr}}
	return exportOTLP(ctx, x, &x.exportTally, ids, exp, endpoint)
}

// readExport is what ExportRead and ExportOTLPRead share: the sessions
// read through the read API, and those left out.
type readExport struct {
	ctx    context.Context
	cl     *client.Client
	listed bool // the ids are sessions.api.list's
	exportTally
}

func (x *readExport) read(id string, fn func(json.RawMessage, *schema.Envelope) error) error {
	return readTwice(x.ctx, x.cl, id, fn)
}

// erased says whether the read API answers session id erased: it does
// for a session with an erasure record (the agent may not read the
// records themselves).
func (x *readExport) erased(id string) bool {
	_, err := x.cl.Read(x.ctx, api.ReadRequest{SessionID: id, Limit: 1})
	return errors.Is(err, client.ErrErased)
}

// refusals is the read API's answer for an erased session: erased since
// the list when the ids are sessions.api.list's.
func (x *readExport) refusals() (bool, error) { return x.listed, client.ErrErased }

// unreadable says a session the read API answers unreadable.
func (x *readExport) unreadable(id string, err error) (string, bool) {
	if !errors.Is(err, client.ErrUnreadable) {
		return "", false
	}
	return fmt.Sprintf("session %s not exported: %v\n", id, err), true
}

// exportTally counts the sessions of an export: those exported, and
// those left out.
type exportTally struct {
	stderr       io.Writer
	skipped      []string // named in the error
	exported     int      // read to their end
	erasedListed int      // listed and erased before their first read
	erasedDuring int      // erased during their export
	erasedNamed  []string // named (not listed) and erased during their export
}

// failed is the export's error once its summary is said: the sessions
// skipped (notExported), and those named that were erased during it (a
// session asked for by name and not exported fails the export, as one
// erased before its first read does).
func (t *exportTally) failed() error {
	err := notExported(t.skipped)
	if len(t.erasedNamed) > 0 {
		err = errors.Join(err, fmt.Errorf("%d sessions named not exported (erased during the export): %s", len(t.erasedNamed), strings.Join(t.erasedNamed, ", ")))
	}
	return err
}

// leftOut is the summary's word on the sessions erased, left out and no
// error.
func (t *exportTally) leftOut() string {
	var say []string
	if t.erasedListed > 0 {
		say = append(say, fmt.Sprintf("%d sessions erased since they were listed left out", t.erasedListed))
	}
	if t.erasedDuring > 0 {
		say = append(say, fmt.Sprintf("%d sessions erased during the export left out", t.erasedDuring))
	}
	if len(say) == 0 {
		return ""
	}
	return " (" + strings.Join(say, "; ") + ")"
}

// sessionReader is what an export reads its sessions with: the store
// (storeExport, the operator's) or the read API (readExport, an agent's).
type sessionReader interface {
	// read gives fn the events of session id (twice).
	read(id string, fn func(json.RawMessage, *schema.Envelope) error) error
	// erased says whether session id has an erasure record.
	erased(id string) bool
	// refusals says whether the ids were listed (not named), and the
	// error of a read that found the session erased.
	refusals() (listed bool, erased error)
	// unreadable is what to say of a session whose first read failed
	// with err, when err leaves it out as unreadable.
	unreadable(id string, err error) (string, bool)
}

// verdict is what an error makes of a session's export.
type verdict int

const (
	endsExport verdict = iota // the error ends the export
	leftOut                   // left out, said and counted
	leftErased                // erased during the export: left out (exportSession says it)
)

// errErased is a session's export stopped on learning that the session
// was erased: nothing more of it is written or sent.
var errErased = errors.New("erased during the export")

// sessionOut is where an export puts a session's events: add takes each
// event of the second read; done, when set, ends a session read whole;
// sent is how many of its events (lines, spans) went out, in unit.
type sessionOut struct {
	add  func(json.RawMessage, *schema.Envelope) error
	done func() error
	sent func() int
	unit string
}

// exportSession exports session id read by x to out, and says whether it
// did. A session erased during its export is left out, said on stderr
// (with how many of its lines or spans went out before the export learned
// it: out asks guard before each write or send that holds any of it) and
// counted in the summary, and is no error: it was erased when the export
// learned so (errErased), or its second read failed or gave other events
// than its first and it has an erasure record, or its first read failed
// and it has one (x.firstRead: a session erased before its first read
// read any of it is erased since the list, or an error when named). Any
// other error of its second read (a *rereadError) ends the export; one of
// its first is x.firstRead's.
func exportSession(t *exportTally, x sessionReader, id string, out sessionOut) (bool, error) {
	err := x.read(id, out.add)
	if err == nil && out.done != nil {
		if err = out.done(); err != nil && !errors.Is(err, errErased) {
			return false, fmt.Errorf("session %s: %w", id, err)
		}
	}
	var re *rereadError
	v := endsExport
	switch {
	case err == nil:
		t.exported++
		return true, nil
	case errors.Is(err, errErased) || errors.As(err, &re) && x.erased(id):
		v = leftErased
	case re != nil:
		return false, err
	default:
		v = firstRead(t, x, id, err)
	}
	switch v {
	case endsExport:
		return false, err
	case leftErased:
		sent := ""
		if n := out.sent(); n > 0 {
			sent = fmt.Sprintf(" (%d of its %s went out before the export learned it)", n, out.unit)
		}
		fmt.Fprintf(t.stderr, "session %s not exported: erased during the export%s\n", id, sent)
		t.erasedDuring++
		if listed, _ := x.refusals(); !listed {
			t.erasedNamed = append(t.erasedNamed, id)
		}
	}
	return false, nil
}

// firstRead is what an error of a session's first read makes of it: one
// that found the session erased is, when the ids were listed, a session
// erased since the list (said, counted), else an error (a session named
// and erased); any other failure of a session that is erased now is an
// erase during the export; one unreadable is skipped (said, named in the
// error); any other error ends the export.
func firstRead(t *exportTally, x sessionReader, id string, err error) verdict {
	listed, erased := x.refusals()
	switch {
	case listed && errors.Is(err, erased):
		fmt.Fprintf(t.stderr, "session %s not exported: erased since it was listed\n", id)
		t.erasedListed++
	case errors.Is(err, erased):
		return endsExport
	case x.erased(id):
		return leftErased
	default:
		say, ok := x.unreadable(id, err)
		if !ok {
			return endsExport
		}
		fmt.Fprint(t.stderr, say)
		t.skipped = append(t.skipped, id)
	}
	return leftOut
}

// guard is out's check before it writes or sends any of session id:
// errErased once the session has an erasure record.
func guard(x sessionReader, id string) func() error {
	return func() error {
		if x.erased(id) {
			return errErased
		}
		return nil
	}
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
