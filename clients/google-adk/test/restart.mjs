// Appends N events one at a time, printing "acked K" after each returns,
// while the test kills sessionlog and starts it again; then prints the
// session's event texts as JSON. The connection reconnects forever.
// Usage: node test/restart.mjs NATS_URL SESSION_ID N
import { createEvent } from "@google/adk";
import { connect } from "nats";
import { SessionlogSessionService } from "../dist/index.js";

const [url, sessionId, n] = process.argv.slice(2);
const nc = await connect({ servers: url, maxReconnectAttempts: -1, reconnectTimeWait: 200 });
const s = new SessionlogSessionService(nc, { timeoutMs: 2000, retryForMs: 120000 });
const key = { appName: "restart", userId: "ann", sessionId };
const session = await s.createSession(key);
for (let k = 0; k < Number(n); k++) {
  await s.appendEvent({ session, event: createEvent({ author: "user", content: { role: "user", parts: [{ text: `event ${k}` }] }, actions: { stateDelta: { k } } }) });
  console.log(`acked ${k}`);
}
const got = await s.getSession(key);
console.log(JSON.stringify({ texts: got.events.map((e) => e.content.parts[0].text), state: got.state }));
await nc.close();
