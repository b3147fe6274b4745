package agentlog

import (
	"fmt"
	"hash/fnv"
	"strconv"

	"github.com/sessionlog/sessionlog/pkg/schema"
)

// SessionID is the sessionlog id of a source session: prefix, "-", then
// the source id with every character outside [A-Za-z0-9_-] replaced by
// "-"; an id longer than 128 is cut to 119 and suffixed with "-" and the 8
// hex digits of the FNV-1a (32-bit) hash of the whole id before the cut.
func SessionID(prefix, sourceID string) string {
	return fitID(prefix+"-"+sourceID, sessionIDByte, schema.MaxIDLen)
}

// ChildID is the id of a session derived from id (a subagent, a branch):
// id + "-" + suffix, under the same rules.
func ChildID(id, suffix string) string {
	return fitID(id+"-"+suffix, sessionIDByte, schema.MaxIDLen)
}

func sessionIDByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

func itemIDByte(c byte) bool { return sessionIDByte(c) || c == '.' || c == ':' }

// fitID replaces the bytes ok refuses by "-" and cuts an id over max as
// SessionID says (max 128: cut to 119, "-", 8 hex digits).
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
