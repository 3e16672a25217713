// Real agent: npm `@anthropic-ai/sdk` `messages.stream(...)` + `finalMessage()`, tool loop.
// The client reads ANTHROPIC_BASE_URL (without /v1) and ANTHROPIC_API_KEY itself.
import Anthropic from "@anthropic-ai/sdk";

const MODEL = process.env.AGENT_MODEL ?? "claude-sonnet-4-6";
const TOOLS = [
  {
    name: "get_weather",
    description: "Current weather for a city.",
    input_schema: {
      type: "object",
      properties: { city: { type: "string" } },
      required: ["city"],
    },
  },
  {
    name: "get_time",
    description: "The current UTC time.",
    input_schema: { type: "object", properties: {} },
  },
];

function runTool(name, input) {
  if (name === "get_weather") return JSON.stringify({ city: input.city, forecast: "sunny" });
  if (name === "get_time") return JSON.stringify({ utc: new Date().toISOString() });
  throw new Error(`unknown tool ${name}`);
}

async function main() {
  const client = new Anthropic({ maxRetries: 0 });
  const messages = [{ role: "user", content: process.env.FLOWPROOF_PROMPT }];
  for (let turn = 0; turn < 10; turn++) {
    let streamed = "";
    const stream = client.messages.stream({
      model: MODEL,
      max_tokens: 1024,
      system: "You are a weather assistant. Use the tools.",
      messages,
      tools: TOOLS,
    });
    stream.on("text", (delta) => {
      streamed += delta;
    });
    const message = await stream.finalMessage();
    messages.push({ role: "assistant", content: message.content });
    const uses = message.content.filter((block) => block.type === "tool_use");
    if (message.stop_reason !== "tool_use" || uses.length === 0) {
      console.log(streamed);
      return;
    }
    messages.push({
      role: "user",
      content: uses.map((use) => ({
        type: "tool_result",
        tool_use_id: use.id,
        content: runTool(use.name, use.input),
      })),
    });
  }
  throw new Error("no final answer after 10 model calls");
}

main().catch((error) => {
  console.error(`agent error: ${error?.stack ?? error}`);
  process.exit(1);
});
