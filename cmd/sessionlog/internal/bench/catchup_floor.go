package bench

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"time"

	"github.com/sessionlog/sessionlog/internal/gen"
	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/internal/procstat"
	"github.com/sessionlog/sessionlog/pkg/session"
	"github.com/sessionlog/sessionlog/services/projector"
	"github.com/sessionlog/sessionlog/services/projector/store"
)

// consumeFloor is what any projector of the stream must do at least,
// measured on the benchmark's stream: consume it with an ordered consumer
// (as the projector does, pages of its fetch size) and nothing else
// (consume only), or consume it and write one Pebble key per event plus
// one summary key per session a batch touched, in batches of the
// projector's size (consume and write). The keys and values are sized as
// the projector's are: the event index value it stores for that event,
// and the summary it stores for that session after the batch's last
// event of it (both computed before the trial from the same generated
// events, so the timed loop only reads the subject and the seq header).
// No decoding, no folding.
type consumeFloor struct {
	ls      *logstore.Store
	events  int
	batch   int
	dir     string
	valSize []uint32         // index value size of the event at stream seq i+1
	sumSize []map[string]int // per batch: the touched sessions' summary size

	consumeOnly, consumeWrite []float64 // ev/s of each trial
	// CPU time of the whole process (server included) per event, in µs,
	// of each trial: less at the mercy of other work on the machine.
	consumeOnlyCPU, consumeWriteCPU []float64
}

func newConsumeFloor(ls *logstore.Store, events, sessions, batch int, dir string) (*consumeFloor, error) {
	r := &consumeFloor{ls: ls, events: events, batch: batch, dir: dir, valSize: make([]uint32, 0, events)}
	fleet := gen.NewFleet("bench", sessions, 42, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	states := map[string]*session.State{}
	var scratch []byte
	type last struct {
		streamSeq uint64
		typ       string
	}
	touched := map[string]last{}
	flush := func() error {
		sizes := make(map[string]int, len(touched))
		for id, l := range touched {
			sum := projector.SummaryOf(states[id], l.streamSeq, l.typ)
			b, err := json.Marshal(&sum)
			if err != nil {
				return err
			}
			sizes[id] = len(b)
		}
		r.sumSize = append(r.sumSize, sizes)
		clear(touched)
		return nil
	}
	for i := range events {
		e := fleet.Next()
		st := states[e.SessionID]
		if st == nil {
			st = session.New(e.SessionID)
			states[e.SessionID] = st
		}
		if err := st.Apply(&e); err != nil {
			return nil, fmt.Errorf("floor: %s seq %d: %w", e.SessionID, e.Seq, err)
		}
		streamSeq := uint64(i + 1)
		scratch = store.AppendEventValue(scratch[:0], streamSeq, &e, false)
		r.valSize = append(r.valSize, uint32(len(scratch)))
		touched[e.SessionID] = last{streamSeq, e.Type}
		if (i+1)%batch == 0 {
			if err := flush(); err != nil {
				return nil, err
			}
		}
	}
	if len(touched) > 0 {
		if err := flush(); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// run measures one trial of each kind, consume only first.
func (r *consumeFloor) run(ctx context.Context) error {
	rate, cpu, err := r.trial(ctx, false)
	if err != nil {
		return err
	}
	r.consumeOnly, r.consumeOnlyCPU = append(r.consumeOnly, rate), append(r.consumeOnlyCPU, cpu)
	if rate, cpu, err = r.trial(ctx, true); err != nil {
		return err
	}
	r.consumeWrite, r.consumeWriteCPU = append(r.consumeWrite, rate), append(r.consumeWriteCPU, cpu)
	return nil
}

// trial consumes the whole stream from its start, writing to a fresh
// store (removed afterwards) if write is set, and returns events/s and
// the process's CPU µs per event. The time runs from creating the
// consumer to the last batch committed.
func (r *consumeFloor) trial(ctx context.Context, write bool) (rate, cpuPerEvent float64, err error) {
	runtime.GC()
	var db *store.DB
	if write {
		path := filepath.Join(r.dir, fmt.Sprintf("floor-%d", len(r.consumeWrite)))
		if db, err = store.Open(path, store.Options{}); err != nil {
			return 0, 0, err
		}
		defer os.RemoveAll(path)
		defer db.Close()
	}
	t, cpu0 := time.Now(), procstat.CPU()
	fol, err := r.ls.Follow(ctx, logstore.FollowSpec{Stream: logstore.Streams()[0], PageEvents: projector.DefaultConfig().FetchBatch, InactiveThreshold: 5 * time.Minute})
	if err != nil {
		return 0, 0, err
	}
	defer fol.Close()
	var (
		b       *store.Batch
		last    int
		key     []byte
		val     = make([]byte, 1<<20)
		touched = map[string]struct{}{}
		nb      int
	)
	commit := func() error {
		for id := range touched {
			b.SetInternal(store.SummaryKey(id), val[:r.sumSize[nb][id]])
		}
		clear(touched)
		nb++
		last = b.Bytes()
		err := b.Commit(store.Checkpoint{})
		b = nil
		return err
	}
	for i := range r.events {
		m, err := fol.Next(ctx)
		if err != nil {
			return 0, 0, err
		}
		if !write {
			continue
		}
		id, ok := logstore.SessionFromSubject(m.Subject)
		seq, err := strconv.ParseUint(m.Header.Get(logstore.HeaderSeq), 10, 64)
		if !ok || err != nil || m.StreamSeq != uint64(i+1) {
			return 0, 0, fmt.Errorf("floor: unexpected message %d on %s", m.StreamSeq, m.Subject)
		}
		if b == nil {
			b = db.NewBatchWithSize(last + last/8)
		}
		key = store.AppendEventKey(key[:0], id, seq)
		v := val[:r.valSize[i]]
		binary.BigEndian.PutUint64(v, m.StreamSeq)
		b.SetInternal(key, v)
		touched[id] = struct{}{}
		if (i+1)%r.batch == 0 {
			if err := commit(); err != nil {
				return 0, 0, err
			}
		}
	}
	if b != nil {
		if err := commit(); err != nil {
			return 0, 0, err
		}
	}
	cpu := procstat.CPU() - cpu0
	return float64(r.events) / time.Since(t).Seconds(), float64(cpu.Microseconds()) / float64(r.events), nil
}
