// Items of the shapes the OpenAI Agents SDK stores (AgentInputItem), for
// the tests: messages, a function call and its output, reasoning.
export const user = (text) => ({ type: "message", role: "user", content: text });
export const assistant = (text) => ({ type: "message", role: "assistant", status: "completed", content: [{ type: "output_text", text }] });
export const call = (id, name, args) => ({ type: "function_call", callId: id, name, status: "completed", arguments: JSON.stringify(args) });
export const result = (id, name, text) => ({ type: "function_call_result", callId: id, name, status: "completed", output: { type: "text", text } });
export const reasoning = (text) => ({ type: "reasoning", content: [{ type: "input_text", text }] });

// connect opens a NATS connection as NATS_USER/NATS_PASS when given.
export async function open(url) {
  const { connect } = await import("nats");
  return connect({ servers: url, ...(process.env.NATS_USER ? { user: process.env.NATS_USER, pass: process.env.NATS_PASS } : {}) });
}
