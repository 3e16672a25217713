// Real agent: Vercel AI SDK `generateText` with tools and a multi-step stop condition, over
// `@ai-sdk/anthropic`, configured the stock way: the provider reads ANTHROPIC_BASE_URL and
// ANTHROPIC_API_KEY itself. It expects the base WITH /v1 (it appends `/messages`), while the
// Anthropic SDKs want it without, so its flow maps `ANTHROPIC_BASE_URL: ${flowproof.proxy_url}`.
import { createAnthropic } from "@ai-sdk/anthropic";
import { generateText, stepCountIs, tool } from "ai";
import { z } from "zod";

const MODEL = process.env.AGENT_MODEL ?? "claude-sonnet-4-6";

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

async function main() {
  const anthropic = createAnthropic();
  const result = await generateText({
    model: anthropic(MODEL),
    system: "You are a weather assistant. Use the tools.",
    prompt: process.env.FLOWPROOF_PROMPT,
    tools,
    stopWhen: stepCountIs(10),
    maxRetries: 0,
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
