// One of several processes appending events to one ADK session at once.
// Usage: node test/concurrent.mjs NATS_URL SESSION_ID WRITER N TOTAL
// WRITER creates the session unless another did, appends N events
// (text "WRITER k"), then reads until the session holds TOTAL events and
// prints their texts in order.
import { createEvent } from "@google/adk";
import { connect } from "nats";
import { SessionlogSessionService, SessionlogError } from "../dist/index.js";

const [url, sessionId, writer, n, total] = process.argv.slice(2);
const nc = await connect({ servers: url });
const s = new SessionlogSessionService(nc);
const key = { appName: "race", userId: "ann", sessionId };
let session;
try {
  session = await s.createSession(key);
} catch (e) {
  if (!(e instanceof SessionlogError && e.code === "conflict")) throw e;
  session = await s.getSession(key);
}
for (let k = 0; k < Number(n); k++) {
  await s.appendEvent({ session, event: createEvent({ author: k % 2 ? "agent" : "user", invocationId: writer, content: { role: "user", parts: [{ text: `${writer} ${k}` }] }, actions: { stateDelta: { [`last-${writer}`]: k } } }) });
}
let got;
for (let i = 0; i < 600; i++) {
  got = await s.getSession(key);
  if (got.events.length >= Number(total)) break;
  await new Promise((r) => setTimeout(r, 100));
}
console.log(JSON.stringify({ texts: got.events.map((e) => e.content.parts[0].text), state: got.state }));
await nc.close();
