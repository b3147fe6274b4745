// One Session call from the command line, for the Go tests. Usage:
// node test/ops.mjs NATS_URL SESSION_ID add|pop|clear|get [ITEMS_JSON]
// Prints {"items": <getItems() after the call>} or, when the call is
// refused, {"error": {"code", "message"}}.
import { SessionlogSession, SessionlogError } from "../dist/index.js";
import { open } from "./items.mjs";

const [url, sessionId, op, arg] = process.argv.slice(2);
const nc = await open(url);
const s = new SessionlogSession(nc, { sessionId, retryForMs: 5000 });
try {
  if (op === "add") await s.addItems(JSON.parse(arg));
  else if (op === "pop") await s.popItem();
  else if (op === "clear") await s.clearSession();
  console.log(JSON.stringify({ id: s.id, items: await s.getItems() }));
} catch (e) {
  if (!(e instanceof SessionlogError)) throw e;
  console.log(JSON.stringify({ id: s.id, error: { code: e.code, message: e.message } }));
}
await nc.close();
