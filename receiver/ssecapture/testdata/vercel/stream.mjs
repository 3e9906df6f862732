// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

// Streams one call through the Vercel AI SDK's OpenAI provider and prints
// what the SDK made of it as one JSON line: the text deltas it delivered
// and the error parts it raised. Usage: node stream.mjs BASE_URL chat|responses
import { streamText, TypeValidationError } from "ai";
import { createOpenAI } from "@ai-sdk/openai";

const [baseURL, api] = process.argv.slice(2);
const openai = createOpenAI({ baseURL, apiKey: "k" });
const model = api === "chat" ? openai.chat("gpt-4o") : openai("gpt-4.1");

const out = { texts: [], errors: [] };
const result = streamText({ model, prompt: "hi", maxRetries: 0, onError: () => {} });
for await (const part of result.fullStream) {
  if (part.type === "text-delta") {
    out.texts.push(part.text);
  } else if (part.type === "error") {
    const e = part.error;
    out.errors.push({
      typeValidation: TypeValidationError.isInstance(e),
      json: JSON.stringify(e instanceof Error ? { message: e.message } : e),
    });
  }
}
console.log(JSON.stringify(out));
