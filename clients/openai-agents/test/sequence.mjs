// The same sequence of Session calls against the SDK's MemorySession and
// against SessionlogSession on a running sessionlog: every read (getItems
// with and without a limit, each popItem's item) must be deep-equal.
// Usage: node test/sequence.mjs NATS_URL SESSION_ID. Prints a JSON report.
import { isDeepStrictEqual } from "node:util";
import { MemorySession } from "@openai/agents";
import { SessionlogSession } from "../dist/index.js";
import { user, assistant, call, result, reasoning, open } from "./items.mjs";

const [url, sessionId] = process.argv.slice(2);
const nc = await open(url);
const mem = new MemorySession({ sessionId });
const sl = new SessionlogSession(nc, { sessionId });
const report = { sessionlogId: sl.id, reads: 0, mismatches: [], items: 0, bigBytes: 0 };

async function both(name, f) {
  const [a, b] = [await f(mem), await f(sl)];
  report.reads++;
  if (!isDeepStrictEqual(a, b)) report.mismatches.push({ step: name, memory: JSON.stringify(a)?.slice(0, 400), sessionlog: JSON.stringify(b)?.slice(0, 400) });
}
async function step(name, f) {
  await f(mem);
  await f(sl);
  for (const limit of [undefined, 0, 1, 3, -1, 5000]) await both(`${name} getItems(${limit})`, (s) => s.getItems(limit));
}

// A big output: 2.5 MB of text with every kind of character JSON escapes.
const big = Array.from({ length: 25000 }, (_, i) => `line ${i}: "quoted" \\ back\tslash ünïcødé 世界 🌍 \u0001\n`).join("").padEnd(2.5e6, "x");
report.bigBytes = Buffer.byteLength(big);

await both("getSessionId", (s) => s.getSessionId());
await step("empty", async () => {});
await both("pop empty", (s) => s.popItem());
await step("add nothing", (s) => s.addItems([]));
await step("first prompt", (s) => s.addItems([user("What is the weather in Zürich? 天気は? 🌦️ \u202eRTL\u202c")]));
await step("a turn with a tool", (s) => s.addItems([
  call("call_1", "get_weather", { city: "Zürich" }),
  result("call_1", "get_weather", "sunny, 21°C ☀️"),
  reasoning("the user wants it short"),
  assistant("It is sunny in Zürich: 21°C."),
]));
await both("pop", (s) => s.popItem());
await both("pop again", (s) => s.popItem());
await step("after pops", async () => {});
await step("re-add", (s) => s.addItems([assistant("Sunny, 21°C — enjoy! 😎")]));
await step("a big tool output", (s) => s.addItems([user("fetch the log"), call("call_big", "fetch_log", { path: "/var/log/big" }), result("call_big", "fetch_log", big)]));
await both("pop the big item", (s) => s.popItem());
await step("the big item again", (s) => s.addItems([result("call_big", "fetch_log", big), assistant(big.slice(0, 300000))]));
await step("clear", (s) => s.clearSession());
await both("pop after clear", (s) => s.popItem());
await step("clear an empty session", (s) => s.clearSession());
await step("1000 items in one call", (s) => s.addItems(Array.from({ length: 1000 }, (_, i) => (i % 2 ? assistant(`reply ${i} ✓`) : user(`prompt ${i} ✎`)))));
for (let i = 0; i < 200; i++) {
  const items = [user(`again ${i}`), call(`c_${i}`, "echo", { i }), result(`c_${i}`, "echo", `${i}`), assistant(`done ${i}`)];
  await mem.addItems(items);
  await sl.addItems(items);
}
await step("200 calls of 4 items", async () => {});
for (let i = 0; i < 3; i++) await both(`pop ${i}`, (s) => s.popItem());
await step("after the last pops", async () => {});

// Another connection, a new object: what it reads is what was written.
const nc2 = await open(url);
const fresh = new SessionlogSession(nc2, { sessionId });
const [m, f] = [await mem.getItems(), await fresh.getItems()];
report.reads++;
if (!isDeepStrictEqual(m, f)) report.mismatches.push({ step: "a new session object", memory: m.length, sessionlog: f.length });
report.items = f.length;
console.log(JSON.stringify(report));
await nc.close();
await nc2.close();
