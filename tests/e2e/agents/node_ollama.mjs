// Real agent: npm `ollama` native /api/chat, tool loop; `--stream` streams each turn (NDJSON).
// The JS client does not read OLLAMA_HOST itself (its default is 127.0.0.1:11434): the agent
// passes it, as its users do. The task is FLOWPROOF_PROMPT.
import { Ollama } from "ollama";

const MODEL = process.env.AGENT_MODEL ?? "llama3.2";
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

function runTool(name, args) {
  if (name === "get_weather") return { city: args.city, forecast: "sunny" };
  if (name === "get_time") return { utc: new Date().toISOString() };
  throw new Error(`unknown tool ${name}`);
}

async function turn(client, messages, stream) {
  if (!stream) {
    const { message } = await client.chat({ model: MODEL, messages, tools: TOOLS, stream: false });
    return { role: "assistant", content: message.content ?? "", tool_calls: message.tool_calls ?? [] };
  }
  let content = "";
  const calls = [];
  for await (const part of await client.chat({ model: MODEL, messages, tools: TOOLS, stream: true })) {
    content += part.message.content ?? "";
    calls.push(...(part.message.tool_calls ?? []));
  }
  return { role: "assistant", content, tool_calls: calls };
}

async function main() {
  const stream = process.argv.includes("--stream");
  const client = new Ollama({ host: process.env.OLLAMA_HOST });
  const messages = [
    { role: "system", content: "You are a weather assistant. Use the tools." },
    { role: "user", content: process.env.FLOWPROOF_PROMPT },
  ];
  for (let i = 0; i < 10; i++) {
    const message = await turn(client, messages, stream);
    messages.push(message);
    if (message.tool_calls.length === 0) {
      console.log(message.content);
      return;
    }
    for (const call of message.tool_calls) {
      const result = runTool(call.function.name, call.function.arguments ?? {});
      messages.push({ role: "tool", content: JSON.stringify(result), tool_name: call.function.name });
    }
  }
  throw new Error("no final answer after 10 model calls");
}

main().catch((error) => {
  console.error(`agent error: ${error}`);
  process.exit(1);
});
