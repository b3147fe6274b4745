// What a process with the deployment's agent credentials (NATS_USER,
// NATS_PASS) can do through SessionlogSession, and what it cannot do
// around it. Usage: node test/agent.mjs NATS_URL SESSION_ID. Prints a
// JSON report; each refused action is reported with the error it got.
import { SessionlogSession } from "../dist/index.js";
import { user, assistant, open } from "./items.mjs";

const [url, sessionId] = process.argv.slice(2);
const mine = await open(url);
const other = await open(url);
const s = new SessionlogSession(mine, { sessionId });
const report = {};

await s.addItems([user("my secret plan"), assistant("noted")]);
report.own = (await s.getItems()).length;
await s.popItem();
report.afterPop = (await s.getItems()).length;

// Another agent, on its own connection with the same user, names the
// session id: there is no isolation between the agent user's sessions yet.
const theirs = new SessionlogSession(other, { sessionId });
report.otherRead = (await theirs.getItems()).length;
await theirs.addItems([user("appended by another agent")]);
report.otherAppendSeen = (await s.getItems()).length;
await theirs.clearSession();
report.afterOtherClear = (await s.getItems()).length;

// Around the package: the stream, the erase endpoint, the KV buckets.
async function refused(subject, body) {
  try {
    await other.request(subject, new TextEncoder().encode(JSON.stringify(body)), { timeout: 3000 });
    return "allowed";
  } catch (e) {
    return String(e.code ?? e.message);
  }
}
report.streamInfo = await refused("$JS.API.STREAM.INFO.SESSIONS", {});
report.directGet = await refused(`$JS.API.DIRECT.GET.SESSIONS`, { last_by_subj: `sessions.ev.${s.id}` });
report.publishEvent = await refused(`sessions.ev.${s.id}`, {});
report.erase = await refused("sessions.api.erase", { sessionId: s.id, reason: "test", by: "agent" });
console.log(JSON.stringify(report));
await mine.close();
await other.close().catch(() => {});
