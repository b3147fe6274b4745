package agentlog

import (
	"crypto/sha256"
	"encoding/base32"
	"fmt"
	"hash/fnv"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/sessionlog/sessionlog/pkg/schema"
)

// SessionID is the sessionlog id of a source session: prefix, "-", then
// the source id. An id that is a valid session id as it is stays as it is
// (a UUID, as Claude Code, codex and pi name their sessions); any other
// has every character outside [A-Za-z0-9_-] replaced by "-", is cut to
// 111 characters, and ends in "-" and 16 characters of the hash of the
// whole id as it was (idHash), so that "a.b" and "a-b", or two long ids
// that differ after the cut, stay apart.
func SessionID(prefix, sourceID string) string {
	return sessionID(prefix + "-" + sourceID)
}

// ChildID is the id of a session derived from id (a subagent, a branch):
// id + "-" + suffix, under the same rules.
func ChildID(id, suffix string) string {
	return sessionID(id + "-" + suffix)
}

// GenerationID is the id of generation n (n >= 2) of a file's session:
// what the file holds once it no longer continues generation n-1 (it
// shrank, or was rewritten).
func GenerationID(id string, n int) string {
	return ChildID(id, "r"+strconv.Itoa(n))
}

// FileSessionID is the id a file's session takes when its own id (id) is
// another file's: id, "-f", and 16 characters of the hash of the file's
// name (FileLabel).
func FileSessionID(id, file string) string {
	return ChildID(id, "f"+idHash(file))
}

// FileLabel names a file by its directory and file name
// ("<project>/<session>.jsonl"): what AppendSink.File takes to tell two
// files with one session id apart.
func FileLabel(path string) string {
	return filepath.ToSlash(filepath.Join(filepath.Base(filepath.Dir(path)), filepath.Base(path)))
}

// hashLen is the characters of an id hash: 80 bits in base32, so that
// finding two ids with one hash is no practical attack.
const hashLen = 16

// idHash is the first 80 bits of the SHA-256 of s, in lower-case base32.
func idHash(s string) string {
	h := sha256.Sum256([]byte(s))
	return strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(h[:10]))
}

// sessionID applies SessionID's rules to id.
func sessionID(id string) string {
	if schema.ValidSessionID(id) {
		return id
	}
	b := []byte(id)
	for i, c := range b {
		if !sessionIDByte(c) {
			b[i] = '-'
		}
	}
	if cut := schema.MaxIDLen - hashLen - 1; len(b) > cut {
		b = b[:cut]
	}
	return string(b) + "-" + idHash(id)
}

func sessionIDByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

func itemIDByte(c byte) bool { return sessionIDByte(c) || c == '.' || c == ':' }

// fitID replaces the bytes ok refuses by "-" and cuts an id over max to
// max-9 and suffixes "-" and the 8 hex digits of its FNV-1a (32-bit) hash
// (item ids: unique within their session only).
func fitID(id string, ok func(byte) bool, max int) string {
	b := []byte(id)
	for i, c := range b {
		if !ok(c) {
			b[i] = '-'
		}
	}
	if len(b) <= max {
		return string(b)
	}
	h := fnv.New32a()
	h.Write([]byte(id))
	return fmt.Sprintf("%s-%08x", b[:max-9], h.Sum32())
}

// ItemID makes a source id (a tool call id, a line uuid) a valid sessionlog
// item id under the same rules (characters outside [A-Za-z0-9_.:-] become
// "-", long ones are cut and hashed). Empty stays empty.
func ItemID(s string) string {
	if s == "" {
		return ""
	}
	return fitID(s, itemIDByte, schema.MaxIDLen)
}

// keyLen bounds a line key so "<key>.<n>" stays a valid id.
const keyLen = 100

// lineKey is the event id stem of a line: its source key, or "L<index>".
func lineKey(key string, index int) string {
	if key == "" {
		return "L" + strconv.Itoa(index)
	}
	return fitID(key, itemIDByte, keyLen)
}

// eventID is the id of the n-th event a line with key maps to.
func eventID(key string, n int) string {
	return key + "." + strconv.Itoa(n)
}
