// Run by services/writer's TestClaudeAgentSDKStoreRealTranscripts against a
// running writer: node test/store-real.mjs NATS_URL SESSION_IDS PROJECT_DIR
// BATCH, with CLAUDE_CONFIG_DIR holding the transcripts as
// TestClaudeAgentSDKStore has them. The SDK's importSessionToStore sends
// each transcript in appends of BATCH entries (a growing file, as the SDK
// mirrors it), into the sessionlog store and into InMemorySessionStore;
// every key must load deep-equal from both. Prints one JSON report line.
import { importSessionToStore, InMemorySessionStore } from "@anthropic-ai/claude-agent-sdk";
import { connect } from "nats";
import { isDeepStrictEqual } from "node:util";
import { SessionlogStore } from "../dist/index.js";

const [url, idList, dir, batch] = process.argv.slice(2);
const batchSize = Number(batch);
const nc = await connect({ servers: url, user: process.env.NATS_USER, pass: process.env.NATS_PASS });
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
const report = { keys: [], mismatches: [], errors: [] };
for (const id of idList.split(",")) {
  try {
    await importSessionToStore(id, store, { dir, batchSize });
  } catch (e) {
    report.errors.push({ id, error: e.code ?? String(e), message: e.message });
  }
  await importSessionToStore(id, recording, { dir, batchSize });
}
for (const key of keys.values()) {
  const got = await store.load(key);
  const want = await mem.load(key);
  report.keys.push({ ...key, entries: got ? got.length : -1, want: want ? want.length : -1 });
  if (!isDeepStrictEqual(got, want)) report.mismatches.push(key);
}
console.log(JSON.stringify(report));
await nc.close();
