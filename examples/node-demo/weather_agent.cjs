// A Node tool-calling agent: the npm `openai` package (Chat Completions, streamed) in a loop.
// The client reads OPENAI_BASE_URL and OPENAI_API_KEY itself, which flowproof injects; the
// task is FLOWPROOF_PROMPT. `openai` comes from examples/node_modules or tests/node_modules
// (NODE_PATH in the spec, set by `make demo`); your own agent uses its own node_modules.
const { OpenAI } = require("openai");

const MODEL = process.env.AGENT_MODEL ?? "gpt-4o-mini";
const TOOLS = [
  {
    type: "function",
    function: {
      name: "get_weather",
      description: "Get the current weather forecast for a city.",
      parameters: {
        type: "object",
        properties: { city: { type: "string" } },
        required: ["city"],
      },
    },
  },
];

function runTool(name, argumentsJson) {
  const args = JSON.parse(argumentsJson || "{}");
  if (name === "get_weather") return JSON.stringify({ city: args.city, forecast: "sunny" });
  return JSON.stringify({ error: `unknown tool ${name}` });
}

// One streamed model turn, reassembled into its text and tool calls.
async function turn(client, messages) {
  const stream = await client.chat.completions.create({
    model: MODEL,
    messages,
    tools: TOOLS,
    stream: true,
  });
  let text = "";
  const calls = [];
  for await (const chunk of stream) {
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
  return { text, calls: calls.filter(Boolean) };
}

async function main() {
  const client = new OpenAI({ apiKey: process.env.OPENAI_API_KEY ?? "unused-offline" });
  const messages = [
    { role: "system", content: "You are a weather assistant. Use the tools." },
    { role: "user", content: process.env.FLOWPROOF_PROMPT ?? process.argv.slice(2).join(" ") },
  ];
  for (let round = 0; round < 8; round++) {
    const { text, calls } = await turn(client, messages);
    if (calls.length === 0) {
      console.log(text.trim());
      return 0;
    }
    messages.push({ role: "assistant", content: text || null, tool_calls: calls });
    for (const call of calls) {
      const content = runTool(call.function.name, call.function.arguments);
      messages.push({ role: "tool", tool_call_id: call.id, content });
    }
  }
  console.error("weather_agent: no final answer after 8 rounds");
  return 1;
}

main().then(
  (code) => process.exit(code),
  (error) => {
    console.error(`weather_agent: ${error}`);
    process.exit(1);
  },
);
