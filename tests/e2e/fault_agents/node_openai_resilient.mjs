// Real agent for faults: npm `openai` Chat Completions with the SDK's default retries, a
// weather tool loop. The client reads OPENAI_BASE_URL / OPENAI_API_KEY itself.
import OpenAI from "openai";

const MODEL = process.env.AGENT_MODEL ?? "gpt-4o-mini";
const TOOLS = [
  {
    type: "function",
    function: {
      name: "get_weather",
      description: "Current weather for a city.",
      parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
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
  if (name === "get_time") return JSON.stringify({ utc: "2026-01-01T09:00:00Z" });
  throw new Error(`unknown tool ${name}`);
}

async function main() {
  const client = new OpenAI();
  const messages = [
    { role: "system", content: "You are a weather assistant. Use the tools." },
    { role: "user", content: process.env.FLOWPROOF_PROMPT },
  ];
  for (let turn = 0; turn < 10; turn++) {
    const response = await client.chat.completions.create({ model: MODEL, messages, tools: TOOLS });
    const message = response.choices[0].message;
    if (!message.tool_calls?.length) {
      console.log(message.content);
      return;
    }
    messages.push({ role: "assistant", content: message.content, tool_calls: message.tool_calls });
    for (const call of message.tool_calls) {
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
  console.error(`agent error: ${error?.message ?? error}`);
  process.exit(1);
});
