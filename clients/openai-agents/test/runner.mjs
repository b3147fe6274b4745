// The SDK's own runner on a SessionlogSession, with a scripted model (no
// network). Usage: node test/runner.mjs NATS_URL SESSION_ID first|resume
//
// first: a run whose model calls the get_weather tool and then answers;
// prints {items} (the session's items after the run) and stays alive until
// it is killed. resume: a new process on the same session id; prints
// {before} (the items it finds) and {seen} (the input the model was given
// in its run: the stored history, then the new prompt) and {after}.
import { Agent, Usage, run, tool, setTracingDisabled } from "@openai/agents";
import { SessionlogSession } from "../dist/index.js";
import { open } from "./items.mjs";

setTracingDisabled(true);
const [url, sessionId, phase] = process.argv.slice(2);
const nc = await open(url);
const session = new SessionlogSession(nc, { sessionId });

const usage = new Usage({ requests: 1, inputTokens: 5, outputTokens: 7, totalTokens: 12 });
const seen = [];
// A scripted model: a call of get_weather when the last input item is the
// prompt, an answer when it is the tool's output.
const model = {
  async getResponse(req) {
    const input = typeof req.input === "string" ? [{ role: "user", content: req.input }] : req.input;
    seen.push(structuredClone(input));
    const last = input.at(-1);
    if (last?.type === "function_call_result") {
      return { usage, responseId: `resp_${seen.length}`, output: [{ type: "message", role: "assistant", status: "completed", id: `msg_${seen.length}`, content: [{ type: "output_text", text: `It is ${last.output?.text ?? last.output} in Zürich.` }] }] };
    }
    return { usage, responseId: `resp_${seen.length}`, output: [{ type: "function_call", id: `fc_${seen.length}`, callId: `call_${phase}_${seen.length}`, name: "get_weather", status: "completed", arguments: JSON.stringify({ city: "Zürich" }) }] };
  },
  getStreamedResponse() {
    throw new Error("not scripted");
  },
};
const getWeather = tool({
  name: "get_weather",
  description: "The weather in a city",
  parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"], additionalProperties: false },
  strict: true,
  execute: async () => (phase === "first" ? "sunny" : "rainy"),
});
const agent = new Agent({ name: "weather", instructions: "Answer about the weather.", model, tools: [getWeather] });

if (phase === "first") {
  const r = await run(agent, "What is the weather in Zürich? ☀️", { session });
  console.log(JSON.stringify({ items: await session.getItems(), final: r.finalOutput }));
  // Killed here by the test, connection open.
  await new Promise(() => {});
} else {
  const before = await session.getItems();
  const r = await run(agent, "And tomorrow?", { session });
  console.log(JSON.stringify({ before, seen: seen[0], after: await session.getItems(), final: r.finalOutput }));
  await nc.close();
}
