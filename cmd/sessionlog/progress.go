package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
)

// progress draws a one-line bar on a terminal, and nothing elsewhere (a
// pipe or a file gets only the lines the verb prints).
type progress struct {
	w     io.Writer
	unit  string // what total counts: "files", "sessions"
	total int
	on    bool
	drawn bool
}

func newProgress(w io.Writer, total int) *progress {
	return &progress{w: w, unit: "files", total: total, on: isTerminal(w)}
}

// isTerminal reports whether w is a terminal (a character device), where
// a progress bar may redraw itself.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	info, err := f.Stat()
	return err == nil && info.Mode()&os.ModeCharDevice != 0
}

// set draws done of total files and the events so far.
func (p *progress) set(done, events int) {
	if !p.on || p.total == 0 {
		return
	}
	const width = 30
	n := done * width / p.total
	fmt.Fprintf(p.w, "\r[%s%s] %d/%d %s, %d events", strings.Repeat("=", n), strings.Repeat(" ", width-n), done, p.total, p.unit, events)
	p.drawn = true
}

// clear erases the bar before other output.
func (p *progress) clear() {
	if p.drawn {
		fmt.Fprint(p.w, "\r\033[K")
		p.drawn = false
	}
}

// eventsBar is a progress bar on w counting events up to total (fork and
// erase draw it on a terminal). It is drawn empty at once: the bar's clock
// starts at its first drawing, and a first drawing at the first poll that
// found events took all of them as done in no time (a first rate of
// 90407739 events/s).
func eventsBar(w io.Writer, total uint64, desc string) *progressbar.ProgressBar {
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
