// Run by services/writer's TestClaudeAgentSDKStore against a running
// writer: node test/store.mjs NATS_URL SESSION_IDS PROJECT_DIR, with
// CLAUDE_CONFIG_DIR holding projects/<sanitized PROJECT_DIR>/<id>.jsonl for
// each id of the comma-separated SESSION_IDS.
// Prints one JSON report line.
import { importSessionToStore, InMemorySessionStore, listSessions } from "@anthropic-ai/claude-agent-sdk";
import { connect } from "nats";
import { isDeepStrictEqual } from "node:util";
import { SessionlogStore } from "../dist/index.js";

const [url, idList, dir] = process.argv.slice(2);
const ids = idList.split(",");
// NATS_USER, NATS_PASS: the user to connect as (the agent user of `sessionlog up`);
// NATS_INBOX: its inbox prefix (an agent of a tenant other than the default: _INBOX.<user>).
const nc = await connect({ servers: url, user: process.env.NATS_USER, pass: process.env.NATS_PASS,
  ...(process.env.NATS_INBOX ? { inboxPrefix: process.env.NATS_INBOX } : {}) });
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
const sorted = (a) => [...a].sort();
for (const id of ids) {
  await importSessionToStore(id, store, { dir });
  await importSessionToStore(id, store, { dir }); // again: adds nothing
  await importSessionToStore(id, recording, { dir });
}
const report = { keys: [], mismatches: [], neverWritten: null, sessionIds: {} };
for (const key of keys.values()) {
  const got = await store.load(key);
  const want = await mem.load(key);
  report.keys.push({ ...key, entries: got ? got.length : -1 });
  if (!isDeepStrictEqual(got, want)) report.mismatches.push(key);
}
const first = [...keys.values()][0];

// Listing, as the SDK defines it by its InMemorySessionStore: the same
// sessions and subkeys; summaries whose SDK-owned data is deep-equal (mtime
// is each store's own write clock, so it is compared with the store's own
// listSessions instead); and the SDK's own listSessions({ sessionStore })
// gives the same sessions from both, but for lastModified.
const project = first.projectKey;
const ours = await store.listSessions(project);
const theirs = await mem.listSessions(project);
report.listed = sorted(ours.map((s) => s.sessionId));
if (!isDeepStrictEqual(report.listed, sorted(theirs.map((s) => s.sessionId)))) report.mismatches.push({ listSessions: theirs });
const mtimes = new Map(ours.map((s) => [s.sessionId, s.mtime]));
const ourSums = await store.listSessionSummaries(project);
const theirSums = new Map((await mem.listSessionSummaries(project)).map((s) => [s.sessionId, s]));
report.summaries = ourSums.length;
if (ourSums.length !== theirSums.size) report.mismatches.push({ summaries: ourSums.length, want: theirSums.size });
for (const s of ourSums) {
  if (!isDeepStrictEqual(s.data, theirSums.get(s.sessionId)?.data) || s.mtime !== mtimes.get(s.sessionId)) {
    report.mismatches.push({ summary: s, want: theirSums.get(s.sessionId) });
  }
}
report.subkeys = {};
for (const sessionId of report.listed) {
  const got = sorted(await store.listSubkeys({ projectKey: project, sessionId }));
  report.subkeys[sessionId] = got;
  if (!isDeepStrictEqual(got, sorted(await mem.listSubkeys({ projectKey: project, sessionId })))) report.mismatches.push({ subkeys: sessionId });
}
const strip = (l) => l.map(({ lastModified, ...rest }) => rest);
const sdkOurs = await listSessions({ dir, sessionStore: store });
const sdkTheirs = await listSessions({ dir, sessionStore: mem });
report.sdkListed = sdkOurs.length;
if (sdkOurs.length === 0 || !isDeepStrictEqual(strip(sdkOurs), strip(sdkTheirs))) report.mismatches.push({ sdkListSessions: sdkOurs, want: sdkTheirs });
report.otherProject = await store.listSessions(project + "-nobody");

report.neverWritten = await store.load({ projectKey: first.projectKey, sessionId: "33333333-3333-4333-8333-333333333333" });
try {
  await store.delete(first);
  report.deleteRefused = null;
} catch (e) {
  report.deleteRefused = e.code ?? String(e);
}
console.log(JSON.stringify(report));
await nc.close();
