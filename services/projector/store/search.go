package store

import (
	"bytes"
	"encoding/binary"
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
