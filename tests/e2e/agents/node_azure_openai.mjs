// Real agent: npm `openai`'s AzureOpenAI, Chat Completions, tool loop. The client reads
// OPENAI_API_VERSION and AZURE_OPENAI_API_KEY itself, and its base URL from OPENAI_BASE_URL
// when set (flowproof sets it: requests go to `<proxy>/v1/deployments/<d>/...`), else from
// AZURE_OPENAI_ENDPOINT. The deployment is AZURE_DEPLOYMENT.
import { AzureOpenAI } from "openai";

const DEPLOYMENT = process.env.AZURE_DEPLOYMENT ?? "weather-gpt";
const TOOLS = [
  {
    type: "function",
    function: {
      name: "get_weather",
      parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
    },
  },
  { type: "function", function: { name: "get_time", parameters: { type: "object", properties: {} } } },
];

function runTool(name, argumentsJson) {
  const args = JSON.parse(argumentsJson || "{}");
  if (name === "get_weather") return JSON.stringify({ city: args.city, forecast: "sunny" });
  if (name === "get_time") return JSON.stringify({ utc: new Date().toISOString() });
  throw new Error(`unknown tool ${name}`);
}

async function main() {
  const client = new AzureOpenAI({ deployment: DEPLOYMENT, maxRetries: 0 });
  const messages = [
    { role: "system", content: "You are a weather assistant. Use the tools." },
    { role: "user", content: process.env.FLOWPROOF_PROMPT },
  ];
  for (let turn = 0; turn < 10; turn++) {
    const response = await client.chat.completions.create({
      model: DEPLOYMENT,
      messages,
      tools: TOOLS,
    });
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
  console.error(`agent error: ${error.name}: ${error.message}`);
  process.exit(1);
});
