// Real agent: npm `@aws-sdk/client-bedrock-runtime` Converse (or ConverseStream with
// BEDROCK_OPERATION=converse_stream), tool loop. The client reads
// AWS_ENDPOINT_URL_BEDROCK_RUNTIME, AWS_REGION and the (placeholder) credentials itself and
// signs every request with SigV4. The client speaks HTTP/2 by default (its bidirectional
// stream needs it), with prior knowledge over a plain-http endpoint, which flowproof's proxy
// refuses; `NodeHttpHandler` (its HTTP/1.1 handler, from @smithy/node-http-handler) is what a
// flowproof-tested agent passes.
import { NodeHttpHandler } from "@smithy/node-http-handler";
import {
  BedrockRuntimeClient,
  ConverseCommand,
  ConverseStreamCommand,
} from "@aws-sdk/client-bedrock-runtime";

const MODEL = process.env.AGENT_MODEL ?? "us.anthropic.claude-3-5-haiku-20241022-v1:0";
const STREAM = process.env.BEDROCK_OPERATION === "converse_stream";
const TOOL_CONFIG = {
  tools: [
    {
      toolSpec: {
        name: "get_weather",
        description: "Current weather for a city.",
        inputSchema: {
          json: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
        },
      },
    },
    {
      toolSpec: {
        name: "get_time",
        description: "The current UTC time.",
        inputSchema: { json: { type: "object", properties: {} } },
      },
    },
  ],
  toolChoice: { [process.env.BEDROCK_TOOL_CHOICE ?? "auto"]: {} },
};

function runTool(name, input) {
  if (name === "get_weather") return { city: input.city, forecast: "sunny" };
  if (name === "get_time") return { utc: new Date().toISOString() };
  throw new Error(`unknown tool ${name}`);
}

async function streamed(client, request) {
  const response = await client.send(new ConverseStreamCommand(request));
  const blocks = new Map();
  const inputs = new Map();
  for await (const event of response.stream) {
    if (event.contentBlockStart) {
      const start = event.contentBlockStart;
      blocks.set(start.contentBlockIndex, { toolUse: { ...start.start.toolUse } });
    } else if (event.contentBlockDelta) {
      const { contentBlockIndex: index, delta } = event.contentBlockDelta;
      if (delta.text !== undefined) {
        const block = blocks.get(index) ?? { text: "" };
        block.text += delta.text;
        blocks.set(index, block);
      } else if (delta.toolUse) {
        inputs.set(index, (inputs.get(index) ?? "") + delta.toolUse.input);
      }
    }
  }
  for (const [index, raw] of inputs) blocks.get(index).toolUse.input = JSON.parse(raw || "{}");
  const content = [...blocks.keys()].sort((a, b) => a - b).map((i) => blocks.get(i));
  return { role: "assistant", content };
}

async function main() {
  const client = new BedrockRuntimeClient({
    maxAttempts: 1,
    requestHandler: new NodeHttpHandler(),
  });
  const messages = [{ role: "user", content: [{ text: process.env.FLOWPROOF_PROMPT }] }];
  for (let turn = 0; turn < 10; turn++) {
    const request = {
      modelId: MODEL,
      messages,
      system: [{ text: "You are a weather assistant. Use the tools." }],
      toolConfig: TOOL_CONFIG,
      inferenceConfig: { maxTokens: 512 },
    };
    const message = STREAM
      ? await streamed(client, request)
      : (await client.send(new ConverseCommand(request))).output.message;
    messages.push(message);
    const uses = message.content.filter((block) => block.toolUse).map((b) => b.toolUse);
    if (uses.length === 0) {
      console.log(message.content.map((block) => block.text ?? "").join(""));
      return;
    }
    messages.push({
      role: "user",
      content: uses.map((use) => ({
        toolResult: { toolUseId: use.toolUseId, content: [{ json: runTool(use.name, use.input) }] },
      })),
    });
  }
  throw new Error("no final answer after 10 model calls");
}

main().catch((error) => {
  console.error(`agent error: ${error.name}: ${error.message}`);
  process.exit(1);
});
