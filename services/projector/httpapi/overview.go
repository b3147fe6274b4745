package httpapi

import (
	"net/http"
	"sync"
	"time"

	"github.com/sessionlog/sessionlog/services/projector/store"
)

// The fleet overview: how many sessions are in each status (counted from
// the status index), and, over the last hour, events folded per second,
// repairs folded and the projector's lag, sampled every fleetEvery while
// the projector runs. The history is the process's memory, not a view: a
// restarted projector starts a new hour.
const (
	fleetSamples = int(time.Hour / (10 * time.Second))
	// countsEvery: status counts scan the status index (100,000 keys take
	// tens of milliseconds), so an answer is reused this long.
	countsEvery = 5 * time.Second
)

// FleetSample is one point of the overview's history.
type FleetSample struct {
	Time time.Time `json:"time"`
	// AppendsPerSec: events folded per second since the previous sample.
	AppendsPerSec float64 `json:"appendsPerSec"`
	// Repairs: repair/applied events folded since the previous sample.
	Repairs float64 `json:"repairs"`
	// Lag: stream messages not yet folded.
	Lag float64 `json:"lag"`
}

// Overview is GET /v1/overview.
type Overview struct {
	Counts  map[string]int `json:"counts"`
	Total   int            `json:"total"`
	History []FleetSample  `json:"history"`
	Every   string         `json:"every"`
	// RolledBack is set when a stream's last sequence went below what the
	// projector consumed (log_rolled_back, Views.RolledBack): the reason.
	RolledBack string `json:"rolledBack,omitempty"`
}

type fleetHistory struct {
	// every is Config.FleetEvery.
	every   time.Duration
	mu      sync.Mutex
	samples []FleetSample
	applied float64
	repairs float64
	counted time.Time
	counts  map[string]int
}

func newFleetHistory(every time.Duration) *fleetHistory { return &fleetHistory{every: every} }

// sample adds a point (the first call only sets the baseline).
func (s *Server) sample(now time.Time) {
	h := s.fleet
	applied, repairs, lag := s.v.Folded()
	h.mu.Lock()
	defer h.mu.Unlock()
	if n := len(h.samples); n > 0 || h.applied > 0 || h.repairs > 0 {
		dt := h.every.Seconds()
		if n > 0 {
			dt = max(now.Sub(h.samples[n-1].Time).Seconds(), 0.001)
		}
		h.samples = append(h.samples, FleetSample{Time: now.UTC(), AppendsPerSec: (applied - h.applied) / dt, Repairs: repairs - h.repairs, Lag: lag})
		if len(h.samples) > fleetSamples {
			h.samples = h.samples[len(h.samples)-fleetSamples:]
		}
	} else {
		h.samples = append(h.samples, FleetSample{Time: now.UTC(), Lag: lag})
	}
	h.applied, h.repairs = applied, repairs
}

func (s *Server) handleOverview(w http.ResponseWriter, r *http.Request) {
	h := s.fleet
	now := s.cfg.Now()
	h.mu.Lock()
	counts, fresh := h.counts, now.Sub(h.counted) < countsEvery
	h.mu.Unlock()
	if !fresh {
		counts = map[string]int{}
		err := s.view(func(rd reader) error {
			for _, st := range store.Statuses {
				n, err := rd.snap.StatusCount(st)
				if err != nil {
					return err
				}
				counts[st] = n
			}
			return nil
		})
		if err != nil {
			s.internal(w, err)
			return
		}
		h.mu.Lock()
		h.counts, h.counted = counts, now
		h.mu.Unlock()
	}
	out := Overview{Counts: counts, Every: h.every.String(), RolledBack: s.v.RolledBack()}
	for _, n := range counts {
		out.Total += n
	}
	h.mu.Lock()
	out.History = append([]FleetSample{}, h.samples...)
	h.mu.Unlock()
	writeJSON(w, out)
}
