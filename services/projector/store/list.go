package store

import (
	"bytes"
	"fmt"
)

// The lists of sessions (GET /v1/sessions): walks of the activity and
// status indexes newest first, reading the summary of each session they
// name, with what they read counted (the projector's
// sessionlog_projector_list_reads_total).

// IndexPos is a place in an activity or status index: session ID, active
// at NS (as TimeKey gives it).
type IndexPos struct {
	NS uint64
	ID string
}

// key is the key of the place in the index under prefix (nil: none).
func (p *IndexPos) key(prefix []byte) []byte {
	if p == nil {
		return nil
	}
	return IndexKey(prefix, p.NS, p.ID)
}

// ListReads counts what a list read: index entries and summaries.
type ListReads struct{ Entries, Summaries int }

// Add adds the counts of r to l.
func (l *ListReads) Add(r ListReads) {
	l.Entries += r.Entries
	l.Summaries += r.Summaries
}

// listPrefix is the index a list walks: the activity index, or a
// status's; with a tenant, that tenant's, which holds its sessions alone.
func listPrefix(tenant, status string) []byte {
	switch {
	case tenant != "" && status != "":
		return TenantStatusPrefix(tenant, status)
	case tenant != "":
		return TenantActivityPrefix(tenant)
	case status != "":
		return StatusPrefix(status)
	}
	return ActivityPrefix()
}

// List reads the summaries of sessions newest activity first: from the
// activity index, or status's (status "": every status); of tenant's
// sessions alone when tenant is set (its own indexes). It starts before
// from (nil: at the newest) and reads up to limit summaries of the
// sessions keep allows (nil: all); a session without a summary is left
// out. more says entries follow the page; reads counts the index entries
// and summaries it read.
func (s Snapshot) List(tenant, status string, from *IndexPos, limit int, keep func(id string) bool) (sums []Summary, more bool, reads ListReads, err error) {
	prefix := listPrefix(tenant, status)
	it, err := s.Iter(prefix)
	if err != nil {
		return nil, false, reads, err
	}
	defer it.Close()
	valid := it.Last()
	if from != nil {
		valid = it.SeekLT(from.key(prefix))
	}
	for ; valid && len(sums) < limit; valid = it.Prev() {
		reads.Entries++
		id := IndexSession(prefix, it.Key())
		if keep != nil && !keep(id) {
			continue
		}
		reads.Summaries++
		sum, err := s.Summary(id)
		if err != nil {
			return nil, false, reads, err
		}
		if sum != nil {
			sums = append(sums, *sum)
		}
	}
	return sums, valid, reads, nil
}

// AgentsList is List for agents of tenant: it reads the indexes of the
// agents (AgentActivityPrefix, or AgentStatusPrefix of status if set),
// which hold the sessions each may read, and merges them newest first (a
// session in two of them is read once). It reads only its agents'
// entries: at most one more per agent than the page takes, and the
// summaries of the page. A summary sees refuses is left out.
func (s Snapshot) AgentsList(tenant string, agents []string, status string, from *IndexPos, limit int, sees func(id string, sum *Summary) bool) (sums []Summary, more bool, reads ListReads, err error) {
	type head struct {
		it     Iterator
		prefix []byte
		valid  bool
	}
	heads := make([]head, 0, len(agents))
	defer func() {
		for _, h := range heads {
			if cerr := h.it.Close(); err == nil {
				err = cerr
			}
		}
	}()
	for _, a := range agents {
		p := AgentActivityPrefix(tenant, a)
		if status != "" {
			p = AgentStatusPrefix(tenant, a, status)
		}
		it, err := s.Iter(p)
		if err != nil {
			return nil, false, reads, err
		}
		h := head{it: it, prefix: p}
		if from == nil {
			h.valid = it.Last()
		} else {
			h.valid = it.SeekLT(from.key(p))
		}
		if h.valid {
			reads.Entries++
		}
		heads = append(heads, h)
	}
	// at is the place of a head's entry: its time and session, which
	// order the entries of every agent's index alike.
	at := func(h *head) []byte { return h.it.Key()[len(h.prefix):] }
	for len(sums) < limit {
		var top []byte
		for i := range heads {
			if h := &heads[i]; h.valid && (top == nil || bytes.Compare(at(h), top) > 0) {
				top = at(h)
			}
		}
		if top == nil {
			break
		}
		top = bytes.Clone(top)
		if len(top) < 8 {
			return nil, false, reads, fmt.Errorf("index key %q: no time", top)
		}
		for i := range heads {
			if h := &heads[i]; h.valid && bytes.Equal(at(h), top) {
				if h.valid = h.it.Prev(); h.valid {
					reads.Entries++
				}
			}
		}
		id := string(top[8:])
		reads.Summaries++
		sum, err := s.Summary(id)
		if err != nil {
			return nil, false, reads, err
		}
		if sum != nil && sees(id, sum) {
			sums = append(sums, *sum)
		}
	}
	for _, h := range heads {
		more = more || h.valid
	}
	return sums, more, reads, nil
}
