// Run by services/writer's TestClaudeAgentSDKStore against a running
// writer: node test/store.mjs NATS_URL SESSION_ID PROJECT_DIR, with
// CLAUDE_CONFIG_DIR holding projects/<sanitized PROJECT_DIR>/SESSION_ID.jsonl.
// Prints one JSON report line.
import { importSessionToStore, InMemorySessionStore } from "@anthropic-ai/claude-agent-sdk";
import { connect } from "nats";
import { isDeepStrictEqual } from "node:util";
import { SessionlogStore } from "../dist/index.js";

const [url, id, dir] = process.argv.slice(2);
const nc = await connect({ servers: url });
const store = new SessionlogStore(nc);
const mem = new InMemorySessionStore();
const keys = new Map();
const recording = {
  append: async (key, entries) => {
    keys.set(JSON.stringify(key), key);
    return mem.append(key, entries);
  },
  load: (key) => mem.load(key),
};
await importSessionToStore(id, store, { dir });
await importSessionToStore(id, store, { dir }); // again: adds nothing
await importSessionToStore(id, recording, { dir });
const report = { keys: [], mismatches: [], neverWritten: null, sessionIds: {} };
for (const key of keys.values()) {
  const got = await store.load(key);
  const want = await mem.load(key);
  report.keys.push({ ...key, entries: got ? got.length : -1 });
  if (!isDeepStrictEqual(got, want)) report.mismatches.push(key);
}
const first = [...keys.values()][0];
report.neverWritten = await store.load({ projectKey: first.projectKey, sessionId: "33333333-3333-4333-8333-333333333333" });
try {
  await store.delete(first);
  report.deleteRefused = null;
} catch (e) {
  report.deleteRefused = e.code ?? String(e);
}
console.log(JSON.stringify(report));
await nc.close();
