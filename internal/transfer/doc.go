// Package transfer moves sessions in and out of the log: the logic of
// the command's export and import verbs. Export and Import move sessions
// between stacks as JSON lines, one stored envelope per line, sessions
// one after another in seq order, through the store (Export reads each
// session twice, a batch at a time: storeExport, twice); ExportOTLP sends
// their turns as OpenTelemetry traces; ImportFrom and ExportTo read and
// write an agent's own session files (DESIGN.md section 13) through the
// writer, as an agent; ExportRead and ExportOTLPRead are Export and
// ExportOTLP of sessions read through the writer (each twice, a page at a
// time: readTwice), for a user that may not read the log. The command
// parses the verbs' flags and calls them here.
package transfer
