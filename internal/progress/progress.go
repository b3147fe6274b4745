// Package progress draws the command's progress bars on a terminal: a
// one-line bar of files or sessions done (import), and a bar of events
// (fork, erase).
package progress

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
)

// Bar draws a one-line bar on a terminal, and nothing elsewhere (a pipe
// or a file gets only the lines the verb prints).
type Bar struct {
	w     io.Writer
	Unit  string // what total counts: "files", "sessions"
	total int
	on    bool
	drawn bool
}

// New is a bar of total files on w.
func New(w io.Writer, total int) *Bar {
	return &Bar{w: w, Unit: "files", total: total, on: IsTerminal(w)}
}

// IsTerminal reports whether w is a terminal (a character device), where
// a progress bar may redraw itself.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	info, err := f.Stat()
	return err == nil && info.Mode()&os.ModeCharDevice != 0
}

// Set draws done of total files and the events so far.
func (p *Bar) Set(done, events int) {
	if !p.on || p.total == 0 {
		return
	}
	const width = 30
	n := done * width / p.total
	fmt.Fprintf(p.w, "\r[%s%s] %d/%d %s, %d events", strings.Repeat("=", n), strings.Repeat(" ", width-n), done, p.total, p.Unit, events)
	p.drawn = true
}

// Clear erases the bar before other output.
func (p *Bar) Clear() {
	if p.drawn {
		fmt.Fprint(p.w, "\r\033[K")
		p.drawn = false
	}
}

// Events is a progress bar on w counting events up to total (fork and
// erase draw it on a terminal). It is drawn empty at once: the bar's clock
// starts at its first drawing, and a first drawing at the first poll that
// found events took all of them as done in no time (a first rate of
// 90407739 events/s).
func Events(w io.Writer, total uint64, desc string) *progressbar.ProgressBar {
	bar := progressbar.NewOptions64(int64(total),
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription(desc),
		progressbar.OptionShowCount(),
		progressbar.OptionShowIts(),
		progressbar.OptionSetItsString("events"),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionSetPredictTime(true),
		progressbar.OptionClearOnFinish(),
	)
	_ = bar.RenderBlank()
	return bar
}
