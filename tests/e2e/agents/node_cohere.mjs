// Real agent: npm `cohere-ai` CohereClientV2 chat, tool loop; `--stream` uses chatStream.
// The JS client reads CO_API_KEY but not CO_API_URL: the agent passes it as `environment`,
// as its users do. The task is FLOWPROOF_PROMPT.
import { CohereClientV2 } from "cohere-ai";

const MODEL = process.env.AGENT_MODEL ?? "command-a-03-2025";
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
    const { message } = await client.chat({ model: MODEL, messages, tools: TOOLS });
    const text = (message.content ?? []).map((block) => block.text ?? "").join("");
    return { text, toolPlan: message.toolPlan ?? "", toolCalls: message.toolCalls ?? [] };
  }
  let text = "";
  let toolPlan = "";
  const toolCalls = [];
  for await (const event of await client.chatStream({ model: MODEL, messages, tools: TOOLS })) {
    if (event.type === "content-delta") text += event.delta.message.content.text ?? "";
    else if (event.type === "tool-plan-delta") toolPlan += event.delta.message.toolPlan ?? "";
    else if (event.type === "tool-call-start") toolCalls.push(structuredClone(event.delta.message.toolCalls));
    else if (event.type === "tool-call-delta")
      toolCalls.at(-1).function.arguments += event.delta.message.toolCalls.function.arguments ?? "";
  }
  return { text, toolPlan, toolCalls };
}

async function main() {
  const stream = process.argv.includes("--stream");
  const client = new CohereClientV2({ environment: process.env.CO_API_URL });
  const messages = [
    { role: "system", content: "You are a weather assistant. Use the tools." },
    { role: "user", content: process.env.FLOWPROOF_PROMPT },
  ];
  for (let i = 0; i < 10; i++) {
    const answer = await turn(client, messages, stream);
    if (answer.toolCalls.length === 0) {
      console.log(answer.text);
      return;
    }
    messages.push({ role: "assistant", toolPlan: answer.toolPlan, toolCalls: answer.toolCalls });
    for (const call of answer.toolCalls) {
      const result = runTool(call.function.name, JSON.parse(call.function.arguments || "{}"));
      messages.push({
        role: "tool",
        toolCallId: call.id,
        content: JSON.stringify(result),
      });
    }
  }
  throw new Error("no final answer after 10 model calls");
}

main().catch((error) => {
  console.error(`agent error: ${error}`);
  process.exit(1);
});
