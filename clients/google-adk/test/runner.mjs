// The ADK's own Runner on a SessionlogSessionService, with a scripted
// model (a BaseLlm; no network). Usage:
// node test/runner.mjs NATS_URL SESSION_ID first|resume
//
// first: creates the session and runs a turn whose model calls the
// get_weather tool, then answers; prints {events, state} (the stored
// session after the run) and stays alive until it is killed. resume: a
// new process on the same session; prints {before} (the session it
// finds), {seen} (the contents the model was given in its first request:
// the stored history, then the new prompt) and {after}.
import { BaseLlm, FunctionTool, LlmAgent, Runner } from "@google/adk";
import { Type } from "@google/genai";
import { connect } from "nats";
import { SessionlogSessionService } from "../dist/index.js";

const [url, sessionId, phase] = process.argv.slice(2);
const nc = await connect({ servers: url, ...(process.env.NATS_USER ? { user: process.env.NATS_USER, pass: process.env.NATS_PASS } : {}) });
const sessionService = new SessionlogSessionService(nc);
const seen = [];

// The model: a call of get_weather when the last content is the prompt,
// an answer when it is the tool's response.
class Scripted extends BaseLlm {
  constructor() {
    super({ model: "scripted" });
  }
  async *generateContentAsync(req) {
    seen.push(structuredClone(req.contents));
    const last = req.contents.at(-1)?.parts?.at(-1);
    if (last?.functionResponse) {
      yield { content: { role: "model", parts: [{ text: `It is ${last.functionResponse.response.result} in Zürich.` }] } };
      return;
    }
    yield { content: { role: "model", parts: [{ functionCall: { id: `call-${phase}`, name: "get_weather", args: { city: "Zürich" } } }] } };
  }
  async connect() {
    throw new Error("not scripted");
  }
}
const getWeather = new FunctionTool({
  name: "get_weather",
  description: "The weather in a city",
  parameters: { type: Type.OBJECT, properties: { city: { type: Type.STRING } }, required: ["city"] },
  execute: async () => ({ result: phase === "first" ? "sunny" : "rainy" }),
});
const agent = new LlmAgent({ name: "weather", instruction: "Answer about the weather.", model: new Scripted(), tools: [getWeather] });
const runner = new Runner({ appName: "weather-app", agent, sessionService });
const key = { appName: "weather-app", userId: "ann", sessionId };
const json = (v) => JSON.parse(JSON.stringify(v));

async function turn(text) {
  let final = "";
  for await (const e of runner.runAsync({ userId: "ann", sessionId, newMessage: { role: "user", parts: [{ text }] }, stateDelta: { "user:city": "Zürich", "temp:t": 1, turns: text } })) {
    for (const p of e.content?.parts ?? []) if (p.text) final = p.text;
  }
  return final;
}

if (phase === "first") {
  await sessionService.createSession({ ...key, state: { plan: "basic" } });
  const final = await turn("What is the weather in Zürich? ☀️");
  const s = await sessionService.getSession(key);
  console.log(JSON.stringify({ events: json(s.events), state: s.state, final }));
  // Killed here by the test, connection open.
  await new Promise(() => {});
} else {
  const before = await sessionService.getSession(key);
  const final = await turn("And tomorrow?");
  const after = await sessionService.getSession(key);
  console.log(JSON.stringify({ before: { events: json(before.events), state: before.state }, seen: json(seen[0]), after: { events: after.events.length, state: after.state }, final }));
  await nc.close();
}
