package store

import (
	"bytes"
	"encoding/binary"
	"strings"
)

// prefSearch holds the search index: vq<term>\x00<id>\x00<seq BE8> -> ""
// for every term of the event seq of session id (its metadata at
// session/created, the text of user and assistant messages). A view key,
// so the checksum covers it and a rebuild reproduces it.
var prefSearch = []byte("vq")

// SearchKey appends the search index key of term in event seq of session id.
func SearchKey(dst []byte, term, id string, seq uint64) []byte {
	return appendSearchKey(dst, term, id, seq)
}

// AppendSearchKey is SearchKey with the term as bytes.
func AppendSearchKey(dst, term []byte, id string, seq uint64) []byte {
	return appendSearchKey(dst, term, id, seq)
}

func appendSearchKey[T string | []byte](dst []byte, term T, id string, seq uint64) []byte {
	dst = append(dst, prefSearch...)
	dst = append(dst, term...)
	dst = append(dst, 0)
	dst = append(dst, id...)
	dst = append(dst, 0)
	return binary.BigEndian.AppendUint64(dst, seq)
}

// SearchTermPrefix bounds the index keys of one term.
func SearchTermPrefix(term string) []byte { return append(cat(prefSearch, term), 0) }

// SearchSessionPrefix bounds the index keys of one term in one session.
func SearchSessionPrefix(term, id string) []byte {
	return append(append(SearchTermPrefix(term), id...), 0)
}

// SearchEntry splits a search key under SearchTermPrefix(term) into its
// session id and seq.
func SearchEntry(termPrefix, key []byte) (id string, seq uint64, ok bool) {
	rest := key[len(termPrefix):]
	if len(rest) < 10 || rest[len(rest)-9] != 0 {
		return "", 0, false
	}
	return string(rest[:len(rest)-9]), binary.BigEndian.Uint64(rest[len(rest)-8:]), true
}

// SearchPrefix bounds the whole search index.
func SearchPrefix() []byte { return bytes.Clone(prefSearch) }

// SearchKeySession is the session id a search key names, "" when k is not
// one. Terms and ids hold no zero byte.
func SearchKeySession(k []byte) string {
	rest, ok := bytes.CutPrefix(k, prefSearch)
	if !ok {
		return ""
	}
	i := bytes.IndexByte(rest, 0)
	if i < 0 {
		return ""
	}
	rest = rest[i+1:]
	j := bytes.IndexByte(rest, 0)
	if j < 0 {
		return ""
	}
	return string(rest[:j])
}

// SearchSession is a session Search found holding the first of its
// terms: ID, and Seq, the first of its events holding that term.
type SearchSession struct {
	ID  string
	Seq uint64
	// check seeks the other terms of the search (others) in the index.
	check  Iterator
	others []string
}

// HoldsAll reports whether the session holds every other term of the
// search too: one seek per term, up to the first it does not hold.
func (s SearchSession) HoldsAll() bool {
	for _, t := range s.others {
		p := SearchSessionPrefix(t, s.ID)
		if !s.check.SeekGE(p) || !bytes.HasPrefix(s.check.Key(), p) {
			return false
		}
	}
	return true
}

// Search walks the sessions holding terms[0] (a term at least) in session
// id order, from the first after the session after ("": the first) and
// calls fn with each until fn returns false: one seek per session. within
// ("": any) keeps the walk to the sessions whose ids begin with it (it
// ends at the first past them); skip ("": none) passes over those whose
// ids begin with it, at one seek. fn asks the session's HoldsAll for the
// other terms.
func (s Snapshot) Search(terms []string, within, skip, after string, fn func(SearchSession) bool) (err error) {
	drive := SearchTermPrefix(terms[0])
	skipped := append(append([]byte(nil), drive...), skip...)
	skippedEnd := PrefixEnd(skipped)
	it, err := s.Iter(drive)
	if err != nil {
		return err
	}
	defer closeIter(it, &err)
	check, err := s.Iter(nil)
	if err != nil {
		return err
	}
	defer closeIter(check, &err)
	// past is the first key after those of session id.
	past := func(id string) []byte { return append(append(append([]byte(nil), drive...), id...), 1) }
	valid := it.SeekGE(append(append([]byte(nil), drive...), within...))
	if after != "" {
		valid = it.SeekGE(past(after))
	}
	for valid {
		id, seq, ok := SearchEntry(drive, it.Key())
		switch {
		case within != "" && !strings.HasPrefix(id, within):
			return nil // past the sessions within
		case skip != "" && bytes.HasPrefix(it.Key(), skipped):
			valid = it.SeekGE(skippedEnd)
			continue
		}
		if !ok {
			valid = it.Next()
			continue
		}
		if !fn(SearchSession{ID: id, Seq: seq, check: check, others: terms[1:]}) {
			return nil
		}
		valid = it.SeekGE(past(id))
	}
	return nil
}
