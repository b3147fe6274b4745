// Run by e2e's TestClaudeAgentSDKStoreOnStack:
//   node test/entries.mjs NATS_URL append PROJECT_KEY SESSION_ID FILE [SUBPATH]
//   node test/entries.mjs NATS_URL load PROJECT_KEY SESSION_ID
//   node test/entries.mjs NATS_URL delete PROJECT_KEY SESSION_ID
// append sends FILE's JSON lines through the store's append (to the
// subagent transcript SUBPATH when given), delete deletes the session;
// each prints what the store's load gives then, the store's listing of
// the project, and the session's subkeys with what each loads, as one
// JSON line.
import { readFileSync } from "node:fs";
import { connect } from "nats";
import { SessionlogStore } from "../dist/index.js";

const [url, mode, projectKey, sessionId, file, subpath] = process.argv.slice(2);
// NATS_USER, NATS_PASS: the user to connect as (the agent user of `sessionlog up`).
const nc = await connect({ servers: url, user: process.env.NATS_USER, pass: process.env.NATS_PASS });
const store = new SessionlogStore(nc);
const key = { projectKey, sessionId };
if (mode === "append") {
  const entries = readFileSync(file, "utf8").split("\n").filter((l) => l !== "").map((l) => JSON.parse(l));
  await store.append(subpath ? { ...key, subpath } : key, entries);
} else if (mode === "delete") {
  await store.delete(key);
}
const loaded = await store.load(key);
const listed = (await store.listSessions(projectKey)).map((s) => s.sessionId);
const subkeys = await store.listSubkeys(key);
const subLoaded = subpath ? await store.load({ ...key, subpath }) : undefined;
process.stdout.write(JSON.stringify({ loaded, listed, subkeys, subLoaded }) + "\n");
await nc.close();
