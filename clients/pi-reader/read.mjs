// pi's own reading of a session file, for the tests of pkg/agentlog/pi:
//   node read.mjs FILE
// opens a copy of FILE with pi's SessionManager (which migrates a format
// v1 or v2 file, rewriting it: hence the copy) and prints the messages of
// buildSessionContext, the conversation pi continues, as one JSON line:
// {"version": <the header's version after opening>, "messages": [...],
// "model": {...}}.
import { copyFileSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import { SessionManager } from "@mariozechner/pi-coding-agent";

const [file] = process.argv.slice(2);
if (!file) {
  process.stderr.write("usage: node read.mjs FILE\n");
  process.exit(2);
}
const dir = mkdtempSync(join(tmpdir(), "pi-reader-"));
try {
  const copy = join(dir, basename(file));
  copyFileSync(file, copy);
  const sm = SessionManager.open(copy, dir);
  const ctx = sm.buildSessionContext();
  const header = JSON.parse(readFileSync(copy, "utf8").split("\n")[0]);
  process.stdout.write(JSON.stringify({ version: header.version, messages: ctx.messages, model: ctx.model }) + "\n");
} finally {
  rmSync(dir, { recursive: true, force: true });
}
