// One of several processes appending to one session at once. Usage:
// node test/concurrent.mjs NATS_URL SESSION_ID WRITER CALLS TOTAL [PAD]
// WRITER makes CALLS addItems calls of 1 to 3 items each (item k of call c
// is {writer, call: c, k}), then reads until the session holds TOTAL items
// (every writer's), and prints them. PAD bytes of text in each item make
// calls that take several requests (an item over 256 KiB goes in parts).
import { SessionlogSession } from "../dist/index.js";
import { open } from "./items.mjs";

const [url, sessionId, writer, calls, total, pad = "0"] = process.argv.slice(2);
const nc = await open(url);
const session = new SessionlogSession(nc, { sessionId });
for (let c = 0; c < Number(calls); c++) {
  const n = 1 + (c % 3);
  await session.addItems(Array.from({ length: n }, (_, k) => ({ type: "message", role: k === 0 ? "user" : "assistant", content: JSON.stringify({ writer, call: c, k, of: n, pad: "é".repeat(Number(pad) / 2) }) })));
}
let items = [];
for (let i = 0; i < 600; i++) {
  items = await session.getItems();
  if (items.length >= Number(total)) break;
  await new Promise((r) => setTimeout(r, 100));
}
console.log(JSON.stringify(items.map((it) => { const { pad: _, ...v } = JSON.parse(it.content); return v; })));
await nc.close();
