// Run by e2e's TestClaudeAgentSDKStoreOnStack:
//   node test/entries.mjs NATS_URL append PROJECT_KEY SESSION_ID FILE
//   node test/entries.mjs NATS_URL load PROJECT_KEY SESSION_ID
// append sends FILE's JSON lines through the store's append; both print
// what the store's load gives then, and the store's listing of the
// project, as one JSON line.
import { readFileSync } from "node:fs";
import { connect } from "nats";
import { SessionlogStore } from "../dist/index.js";

const [url, mode, projectKey, sessionId, file] = process.argv.slice(2);
const nc = await connect({ servers: url });
const store = new SessionlogStore(nc);
const key = { projectKey, sessionId };
if (mode === "append") {
  const entries = readFileSync(file, "utf8").split("\n").filter((l) => l !== "").map((l) => JSON.parse(l));
  await store.append(key, entries);
}
const loaded = await store.load(key);
const listed = (await store.listSessions(projectKey)).map((s) => s.sessionId);
process.stdout.write(JSON.stringify({ loaded, listed }) + "\n");
await nc.close();
