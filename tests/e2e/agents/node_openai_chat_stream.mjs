// Real agent: npm `openai` Chat Completions, streamed (stream + include_usage), tool loop.
// The client reads OPENAI_BASE_URL / OPENAI_API_KEY itself; the task is FLOWPROOF_PROMPT.
import OpenAI from "openai";

const MODEL = process.env.AGENT_MODEL ?? "gpt-4o-mini";
const TOOLS = [
  {
    type: "function",
    function: {
      name: "get_weather",
      description: "Current weather for a city.",
      parameters: {
        type: "object",
        properties: { city: { type: "string" } },
        required: ["city"],
      },
    },
  },
  {
    type: "function",
    function: {
      name: "get_time",
      description: "The current UTC time.",
      parameters: { type: "object", properties: {} },
    },
  },
];

function runTool(name, argumentsJson) {
  const args = JSON.parse(argumentsJson || "{}");
  if (name === "get_weather") return JSON.stringify({ city: args.city, forecast: "sunny" });
  if (name === "get_time") return JSON.stringify({ utc: new Date().toISOString() });
  throw new Error(`unknown tool ${name}`);
}

async function streamTurn(client, messages) {
  const stream = await client.chat.completions.create({
    model: MODEL,
    messages,
    tools: TOOLS,
    stream: true,
    stream_options: { include_usage: true },
  });
  let text = "";
  let sawUsage = false;
  const calls = [];
  for await (const chunk of stream) {
    if (chunk.usage) sawUsage = true;
    for (const choice of chunk.choices) {
      const delta = choice.delta ?? {};
      if (delta.content) text += delta.content;
      for (const part of delta.tool_calls ?? []) {
        calls[part.index] ??= { id: "", type: "function", function: { name: "", arguments: "" } };
        const call = calls[part.index];
        if (part.id) call.id = part.id;
        if (part.function?.name) call.function.name += part.function.name;
        if (part.function?.arguments) call.function.arguments += part.function.arguments;
      }
    }
  }
  if (!sawUsage) throw new Error("stream ended without the usage chunk (include_usage)");
  return { text, calls: calls.filter(Boolean) };
}

async function main() {
  // No retries, unless AGENT_RETRIES says how many (`default`: the SDK's own).
  const wanted = process.env.AGENT_RETRIES ?? "0";
  const client = new OpenAI(wanted === "default" ? {} : { maxRetries: Number(wanted) });
  const messages = [
    { role: "system", content: "You are a weather assistant. Use the tools." },
    { role: "user", content: process.env.FLOWPROOF_PROMPT },
  ];
  for (let turn = 0; turn < 10; turn++) {
    const { text, calls } = await streamTurn(client, messages);
    if (calls.length === 0) {
      console.log(text);
      return;
    }
    messages.push({ role: "assistant", content: text || null, tool_calls: calls });
    for (const call of calls) {
      messages.push({
        role: "tool",
        tool_call_id: call.id,
        content: runTool(call.function.name, call.function.arguments),
      });
    }
  }
  throw new Error("no final answer after 10 model calls");
}

main().catch((error) => {
  console.error(`agent error: ${error?.stack ?? error}`);
  process.exit(1);
});
