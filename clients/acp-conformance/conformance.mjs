// ACP conformance of `sessionlog acp`, driven by the protocol's own SDK
// (@agentclientprotocol/sdk) as the client, over stdio, the way an editor
// runs it. cmd/sessionlog/acp_test.go runs this script against a real
// stack and checks its report against the session it wrote.
//
//   node conformance.mjs <sessionlog binary> <projector URL> <session id> <live updates to wait for>
//
// It initializes, pages through session/list, loads the session, checks
// that session/prompt and session/new are refused and that loading an
// unknown session is not found, waits for the live updates the test
// appends after it prints {"loaded":true}, and prints a report (one JSON
// line) on stdout. Every session/update notification is also read off the
// wire and validated against the SDK's own zod schema of
// SessionNotification (the one its client parses with); a value the
// schema only accepts by dropping or defaulting a field counts as invalid.
import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";
import { isDeepStrictEqual } from "node:util";
import * as acp from "@agentclientprotocol/sdk";

const [bin, url, sessionId, liveWanted] = process.argv.slice(2);
const zodPath = new URL("./node_modules/@agentclientprotocol/sdk/dist/v1/schema/zod.gen.js", import.meta.url);
const { zSessionNotification, zInitializeResponse, zListSessionsResponse } = await import(zodPath);

const child = spawn(bin, ["acp", "--http-url", url, "--page-size", "1"], { stdio: ["pipe", "pipe", "inherit"] });
const [forSdk, forCheck] = Readable.toWeb(child.stdout).tee();

const report = { wire: [], invalid: [], handled: 0, list: [], prompt: null, missing: null, newSession: null };

// strict: the schema's parse must give back the value itself.
function strict(schema, value) {
  const r = schema.safeParse(value);
  if (!r.success) return r.error.message;
  const back = JSON.parse(JSON.stringify(r.data));
  if (!isDeepStrictEqual(back, value)) return "the schema changed the value: " + JSON.stringify(back);
  return null;
}

// Read the agent's stdout as the SDK does, line by line, on the side.
const wireDone = (async () => {
  const dec = new TextDecoder();
  let buf = "";
  for await (const chunk of forCheck) {
    buf += dec.decode(chunk, { stream: true });
    let i;
    while ((i = buf.indexOf("\n")) >= 0) {
      const line = buf.slice(0, i);
      buf = buf.slice(i + 1);
      if (!line.trim()) continue;
      const msg = JSON.parse(line);
      if (msg.method !== "session/update") continue;
      report.wire.push(msg.params);
      const why = strict(zSessionNotification, msg.params);
      if (why) report.invalid.push({ params: msg.params, why });
    }
  }
})();

let onUpdate = () => {};
const app = acp.client({ name: "sessionlog-conformance" }).onNotification(acp.methods.client.session.update, (ctx) => {
  report.handled++;
  onUpdate();
});

const stream = acp.ndJsonStream(Writable.toWeb(child.stdin), forSdk);
await app.connectWith(stream, async (ctx) => {
  const init = await ctx.request(acp.methods.agent.initialize, {
    protocolVersion: acp.PROTOCOL_VERSION,
    clientCapabilities: { fs: { readTextFile: false, writeTextFile: false }, terminal: false },
    clientInfo: { name: "sessionlog-conformance", version: "1" },
  });
  report.initialize = init;
  report.initializeInvalid = strict(zInitializeResponse, init);

  let cursor;
  do {
    const page = await ctx.request(acp.methods.agent.session.list, cursor ? { cursor } : {});
    const why = strict(zListSessionsResponse, page);
    if (why) report.invalid.push({ list: page, why });
    report.list.push(...page.sessions);
    cursor = page.nextCursor;
  } while (cursor);

  await ctx.request(acp.methods.agent.session.load, { sessionId, cwd: "/", mcpServers: [] });
  report.replayed = report.handled;

  try {
    await ctx.request(acp.methods.agent.session.prompt, { sessionId, prompt: [{ type: "text", text: "hi" }] });
    report.prompt = { refused: false };
  } catch (err) {
    report.prompt = { refused: true, code: err.code, message: err.message };
  }

  try {
    await ctx.request(acp.methods.agent.session.load, { sessionId: "no-such-session", cwd: "/", mcpServers: [] });
    report.missing = { refused: false };
  } catch (err) {
    report.missing = { refused: true, code: err.code, message: err.message };
  }
  try {
    await ctx.request(acp.methods.agent.session.new, { cwd: "/", mcpServers: [] });
    report.newSession = { refused: false };
  } catch (err) {
    report.newSession = { refused: true, code: err.code, message: err.message };
  }

  // The test appends now; wait for its updates to arrive live.
  const want = report.replayed + Number(liveWanted);
  const live = new Promise((resolve) => {
    onUpdate = () => report.handled >= want && resolve();
    onUpdate();
  });
  process.stdout.write(JSON.stringify({ loaded: true, replayed: report.replayed }) + "\n");
  await live;
});
child.stdin.end();
await wireDone;
await new Promise((resolve) => child.on("exit", resolve).exitCode !== null && resolve());
process.stdout.write(JSON.stringify(report) + "\n");
