// Adds N items one call at a time, printing "acked K" after each call
// returns, while the test kills sessionlog and starts it again; then
// prints the session's items (their contents) as JSON. The connection
// reconnects forever. Usage: node test/restart.mjs NATS_URL SESSION_ID N
import { connect } from "nats";
import { SessionlogSession } from "../dist/index.js";

const [url, sessionId, n] = process.argv.slice(2);
const nc = await connect({ servers: url, maxReconnectAttempts: -1, reconnectTimeWait: 200 });
const s = new SessionlogSession(nc, { sessionId, timeoutMs: 2000, retryForMs: 120000 });
for (let k = 0; k < Number(n); k++) {
  await s.addItems([{ type: "message", role: "user", content: `item ${k}` }]);
  console.log(`acked ${k}`);
}
console.log(JSON.stringify((await s.getItems()).map((i) => i.content)));
await nc.close();
