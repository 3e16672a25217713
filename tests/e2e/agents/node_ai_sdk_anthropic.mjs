// Real agent: Vercel AI SDK `generateText` with tools and a multi-step stop condition, over
// `@ai-sdk/anthropic`. That provider reads ANTHROPIC_BASE_URL too but expects it WITH /v1
// (it appends `/messages`), while the Anthropic SDKs (and flowproof) set it WITHOUT /v1: so
// the base is derived from ANTHROPIC_BASE_URL here. ANTHROPIC_API_KEY is read by the provider.
import { createAnthropic } from "@ai-sdk/anthropic";
import { generateText, stepCountIs, tool } from "ai";
import { z } from "zod";

const MODEL = process.env.AGENT_MODEL ?? "claude-sonnet-4-6";

function anthropicBaseURL() {
  const base = process.env.ANTHROPIC_BASE_URL?.replace(/\/+$/, "");
  if (!base) return undefined; // the provider's default, https://api.anthropic.com/v1
  return base.endsWith("/v1") ? base : `${base}/v1`;
}

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
  const anthropic = createAnthropic({ baseURL: anthropicBaseURL() });
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
