// Real agent: Vercel AI SDK `generateText` with tools and a multi-step stop condition, over
// `@ai-sdk/openai`, whose `openai(modelId)` is the Responses API. The provider is built from
// OPENAI_BASE_URL (which includes /v1) and reads OPENAI_API_KEY itself.
import { createOpenAI } from "@ai-sdk/openai";
import { generateText, stepCountIs, tool } from "ai";
import { z } from "zod";

const MODEL = process.env.AGENT_MODEL ?? "gpt-4o-mini";

const tools = {
  get_weather: tool({
    description: "Current weather for a city.",
    inputSchema: z.object({ city: z.string().describe("The city to look up.") }),
    execute: async ({ city }) => ({ city, forecast: "sunny" }),
  }),
  get_time: tool({
    description: "The current UTC time.",
    inputSchema: z.object({}),
    execute: async () => ({ utc: new Date().toISOString() }),
  }),
};

// No retries, unless AGENT_RETRIES says how many (`default`: the SDK's own).
function retries() {
  const wanted = process.env.AGENT_RETRIES ?? "0";
  return wanted === "default" ? {} : { maxRetries: Number(wanted) };
}

async function main() {
  const openai = createOpenAI({ baseURL: process.env.OPENAI_BASE_URL });
  const result = await generateText({
    model: openai(MODEL),
    system: "You are a weather assistant. Use the tools.",
    prompt: process.env.FLOWPROOF_PROMPT,
    tools,
    stopWhen: stepCountIs(10),
    ...retries(),
  });
  if (result.finishReason !== "stop") {
    throw new Error(`run ended with finishReason=${result.finishReason}`);
  }
  console.log(result.text);
}

main().catch((error) => {
  console.error(`agent error: ${error?.stack ?? error}`);
  process.exit(1);
});
