// The same sequence of SessionService calls against the ADK's
// InMemorySessionService and against SessionlogSessionService on a
// running sessionlog: every answer, as JSON, must be deep-equal (ADK's
// own database service keeps sessions as JSON too). Usage:
// node test/sequence.mjs NATS_URL APP. Prints a JSON report.
import { isDeepStrictEqual } from "node:util";
import { InMemorySessionService, createEvent } from "@google/adk";
import { connect } from "nats";
import { SessionlogSessionService } from "../dist/index.js";

const [url, app] = process.argv.slice(2);
// Session creation times are the clock's: one clock for both services.
Date.now = () => 1765000000000;
const nc = await connect({ servers: url, ...(process.env.NATS_USER ? { user: process.env.NATS_USER, pass: process.env.NATS_PASS } : {}) });
const mem = new InMemorySessionService();
const sl = new SessionlogSessionService(nc);
const report = { calls: 0, mismatches: [], events: 0 };
const json = (v) => (v === undefined ? "undefined" : JSON.parse(JSON.stringify(v)));

// Each service keeps the session objects it hands out, as a runner does.
const held = { mem: new Map(), sl: new Map() };
async function both(name, f) {
  const a = json(await f(mem, held.mem));
  const b = json(await f(sl, held.sl));
  report.calls++;
  if (!isDeepStrictEqual(a, b)) report.mismatches.push({ step: name, memory: JSON.stringify(a).slice(0, 600), sessionlog: JSON.stringify(b).slice(0, 600) });
  return b;
}
const create = (userId, sessionId, state) => both(`create ${userId}/${sessionId}`, async (s, h) => {
  const x = await s.createSession({ appName: app, userId, sessionId, state });
  h.set(`${userId}/${sessionId}`, x);
  return x;
});
let ts = 1765000000000;
// One event for both services: the same id and time, each its own copy.
function append(key, params) {
  const timestamp = ++ts;
  const id = params.id ?? `e${timestamp}`;
  return both(`append ${key} ${id}`, (s, h) => s.appendEvent({ session: h.get(key), event: createEvent({ invocationId: "inv-1", timestamp, id, ...structuredClone(params) }) }));
}
const get = (userId, sessionId, config) => both(`get ${userId}/${sessionId} ${JSON.stringify(config ?? {})}`, (s) => s.getSession({ appName: app, userId, sessionId, config }));
const list = (req) => both(`list ${JSON.stringify(req)}`, (s) => s.listSessions({ appName: app, ...req }));
const text = (author, t, extra = {}) => ({ author, content: { role: author === "user" ? "user" : "model", parts: [{ text: t }] }, ...extra });

await create("ann", "s1", { plan: "basic", "temp:draft": "never stored", "app:seed": 1 });
await create("ann", "s2");
await create("bob", "s1", { plan: "pro" });
await get("ann", "s1");
await get("ann", "nope");
await append("ann/s1", text("user", "What is the weather in Zürich? 天気は? 🌦️ \u202eRTL\u202c"));
await append("ann/s1", { author: "weather", content: { role: "model", parts: [{ text: "Let me check." }, { functionCall: { id: "fc-1", name: "get_weather", args: { city: "Zürich" } } }] } });
await append("ann/s1", { author: "weather", content: { role: "user", parts: [{ functionResponse: { id: "fc-1", name: "get_weather", response: { result: "sunny, 21°C ☀️" } } }] } });
await append("ann/s1", text("weather", "It is sunny.", { actions: { stateDelta: { count: 1, "temp:scratch": "x", "app:theme": "dark", "user:lang": "de" } } }));
await append("ann/s1", text("weather", "partial…", { partial: true }));
await append("ann/s1", { id: "fixed-1", ...text("weather", "first version", { actions: { stateDelta: { count: 2 } } }) });
await append("ann/s1", { id: "fixed-1", ...text("weather", "second version") });
await append("ann/s1", { author: "weather", content: { role: "model", parts: [{ thought: true, text: "thinking" }] } });
const big = Array.from({ length: 25000 }, (_, i) => `line ${i}: "quoted" \\ ünïcødé 世界 🌍 \u0001\n`).join("").padEnd(2.5e6, "x");
await append("ann/s1", text("user", "fetch the log"));
await append("ann/s1", { author: "weather", content: { role: "user", parts: [{ functionResponse: { id: "fc-none", name: "fetch", response: { log: big } } }] } });
await get("ann", "s1");
await get("ann", "s2");
await get("bob", "s1");
await append("ann/s2", text("user", "second session", { actions: { stateDelta: { "user:lang": "fr", "app:theme": "light" } } }));
await get("ann", "s1");
await get("bob", "s1");
for (let i = 0; i < 1000; i++) await append("ann/s2", text(i % 2 ? "helper" : "user", `message ${i} ✓`, { actions: { stateDelta: { n: i } } }));
for (const config of [{ numRecentEvents: 3 }, { afterTimestamp: ts - 5 }, { numRecentEvents: 10, afterTimestamp: ts - 3 }, { afterTimestamp: 1 }]) await get("ann", "s2", config);
await create("cid", "s9");
for (const req of [{}, { userId: "ann" }, { userId: "nobody" }, { order: "asc" }, { order: "desc" }, { limit: 2 }, { limit: 2, page: 2 }, { limit: 2, offset: 1, order: "desc" }, { offset: 1 }]) await list(req);
await both("delete bob/s1", (s) => s.deleteSession({ appName: app, userId: "bob", sessionId: "s1" }));
await both("delete never created", (s) => s.deleteSession({ appName: app, userId: "bob", sessionId: "nope" }));
await get("bob", "s1");
await list({});
await list({ userId: "bob", limit: 5 });

// Another service on another connection reads what was written.
const nc2 = await connect({ servers: url, ...(process.env.NATS_USER ? { user: process.env.NATS_USER, pass: process.env.NATS_PASS } : {}) });
const fresh = new SessionlogSessionService(nc2);
for (const [u, s] of [["ann", "s1"], ["ann", "s2"], ["cid", "s9"]]) {
  const a = json(await mem.getSession({ appName: app, userId: u, sessionId: s }));
  const b = json(await fresh.getSession({ appName: app, userId: u, sessionId: s }));
  report.calls++;
  report.events += b.events.length;
  if (!isDeepStrictEqual(a, b)) report.mismatches.push({ step: `a new service: ${u}/${s}`, memory: JSON.stringify(a).slice(0, 600), sessionlog: JSON.stringify(b).slice(0, 600) });
}
console.log(JSON.stringify(report));
await nc.close();
await nc2.close();
