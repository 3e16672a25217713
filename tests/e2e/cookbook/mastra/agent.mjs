// A Mastra agent with one tool, registered in a Mastra instance, on the Vercel AI SDK's
// OpenAI provider. `openai(modelId)` from @ai-sdk/openai is the Responses API; the default
// provider reads OPENAI_BASE_URL (which includes /v1) and OPENAI_API_KEY.
import { openai } from "@ai-sdk/openai";
import { Mastra } from "@mastra/core";
import { Agent } from "@mastra/core/agent";
import { createTool } from "@mastra/core/tools";
import { z } from "zod";

const getWeather = createTool({
  id: "get_weather",
  description: "Current weather for a city.",
  inputSchema: z.object({ city: z.string().describe("The city to look up.") }),
  execute: async ({ city }) => `sunny, 24 C in ${city}`,
});

const weatherAgent = new Agent({
  id: "weather-assistant",
  name: "Weather assistant",
  instructions: "You are a weather assistant. Use the tools.",
  model: openai("gpt-4o-mini"),
  tools: { get_weather: getWeather },
});

const mastra = new Mastra({ agents: { weatherAgent } });

const task = process.argv[2] ?? process.env.FLOWPROOF_PROMPT;
const result = await mastra.getAgent("weatherAgent").generate(task, { maxSteps: 5 });
console.log(result.text);
