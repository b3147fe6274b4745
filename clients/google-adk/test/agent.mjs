// What a process with the deployment's agent credentials (NATS_USER,
// NATS_PASS) can do through SessionlogSessionService. Usage:
// node test/agent.mjs NATS_URL. Prints a JSON report; a refused call is
// reported with its error code.
import { createEvent } from "@google/adk";
import { connect } from "nats";
import { SessionlogSessionService } from "../dist/index.js";

const [url] = process.argv.slice(2);
const opts = { servers: url, user: process.env.NATS_USER, pass: process.env.NATS_PASS };
const mine = new SessionlogSessionService(await connect(opts));
const theirs = new SessionlogSessionService(await connect(opts));
const report = {};
const code = async (f) => {
  try {
    await f();
    return "allowed";
  } catch (e) {
    return e.code ?? String(e);
  }
};

const key = { appName: "shop", userId: "ann", sessionId: "private-1" };
const s = await mine.createSession({ ...key, state: { secret: "plan" } });
await mine.appendEvent({ session: s, event: createEvent({ author: "user", content: { role: "user", parts: [{ text: "my secret plan" }] }, actions: { stateDelta: { "user:tier": "gold", "app:open": true } } }) });
report.own = (await mine.getSession(key)).events.length;
report.listed = (await mine.listSessions({ appName: "shop" })).totalItems;
// Another agent with the same user, naming the app, user and session id:
// no isolation between the agent user's sessions yet.
const other = await theirs.getSession(key);
report.otherRead = other?.events.length ?? 0;
report.otherState = other?.state ?? null;
await theirs.appendEvent({ session: other, event: createEvent({ author: "user", content: { role: "user", parts: [{ text: "appended by another agent" }] } }) });
report.otherAppendSeen = (await mine.getSession(key)).events.length;
report.deleteRefused = await code(() => theirs.deleteSession(key));
report.afterDelete = (await mine.getSession(key))?.events.length ?? 0;
console.log(JSON.stringify(report));
process.exit(0);
