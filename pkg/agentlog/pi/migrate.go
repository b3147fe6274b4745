package pi

import "strconv"

// currentVersion is the session format version pi writes
// (CURRENT_SESSION_VERSION of session-manager.ts).
const currentVersion = 3

// roleHookMessage is the version 2 name of the custom role.
const roleHookMessage = "hookMessage"

// An older file is read as pi reads it: pi's SessionManager migrates a
// file whose header says version 1 or 2 (or no version) when it opens it
// (session-manager.ts, migrateToCurrentVersion), and the mapping reads
// each line as that migration leaves it:
//
//   - version 1 → 2: entries have no id/parentId; pi gives every entry
//     but a header a new id, with the entry before it in the file as its
//     parent, so the file is one chain in file order; a compaction's
//     firstKeptEntryIndex (an index into the file's parsed lines, the
//     header at 0) becomes the firstKeptEntryId of the entry there.
//   - version 2 → 3: the message role hookMessage is renamed custom.
//
// A chain in file order is what a line outside the tree is (Line.ID ""):
// it is mapped in the main session where it stands. So a version 1 entry
// has no tree id, whatever id it carries, and the mapping of the first k
// lines is a prefix of the mapping of the whole file. pi's new ids are
// random; a version 1 entry's events are named by its line number.

// sawHeader notes the format version of the file: the first header's
// (pi's header?.version ?? 1).
func (m *mapper) sawHeader(h *header) {
	if m.version == 0 {
		m.version = max(h.Version, 1)
	}
}

// chained reports whether the file's entries form a chain in file order
// (version 1; before a header, an entry without an id is taken as one).
func (m *mapper) chained() bool { return m.version < 2 }

// migrate brings a decoded entry to version 3.
func (m *mapper) migrate(e *entry) {
	if m.chained() {
		e.ID, e.ParentID = "", nil
	}
	if m.version < currentVersion && e.Message != nil && e.Message.Role == roleHookMessage {
		e.Message.Role = roleCustom
	}
}

// number gives a version 1 entry the id its place in the file makes
// (its index among the mapped lines, the header at 0, as in pi's list of
// parsed lines) and resolves a compaction's firstKeptEntryIndex to that
// id. Map calls it for every line, in file order. (pi also counts a JSON
// line that has no type, which sessionlog skips as damaged: in a file
// with one before a compaction, the kept entry would be one further on.)
func (m *mapper) number(v any) {
	n := m.lines
	m.lines++
	e, ok := v.(*entry)
	if !ok || !m.chained() {
		return
	}
	e.ID = chainID(n)
	if e.Type == typeCompaction && e.FirstKeptEntryIndex != nil {
		// pi resolves only an entry before the compaction (the ones after
		// it have no id yet) that is not the header.
		if i := *e.FirstKeptEntryIndex; i > 0 && i < n {
			e.FirstKeptEntryID = chainID(i)
		}
	}
}

// chainID is the id of the version 1 entry at index n.
func chainID(n int) string { return "#" + strconv.Itoa(n) }
