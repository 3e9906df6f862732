// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

// Captures the spans the Vercel AI SDK emits with experimental_telemetry for
// a streamText call through its Responses and Chat providers, against
// fakellm, as OTLP JSON.
import { streamText } from 'ai';
import { createOpenAI } from '@ai-sdk/openai';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { trace } from '@opentelemetry/api';

const base = process.argv[2];
const exporter = new InMemorySpanExporter();
const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
trace.setGlobalTracerProvider(provider);
const tracer = provider.getTracer('ai');
const openai = createOpenAI({ baseURL: base + '/v1', apiKey: 'sk-golden' });

async function run(model, functionId) {
  const r = streamText({ model, prompt: 'Write a haiku about stalled streams.', experimental_telemetry: { isEnabled: true, functionId, tracer } });
  let text = '';
  for await (const part of r.textStream) text += part;
  return text;
}
await run(openai('gpt-4o-mini'), 'responses-route');
await run(openai.chat('gpt-4o-mini'), 'chat-route');
await provider.forceFlush();

const ns = (hr) => (BigInt(hr[0]) * 1000000000n + BigInt(hr[1])).toString();
const value = (v) => {
  if (typeof v === 'string') return { stringValue: v };
  if (typeof v === 'boolean') return { boolValue: v };
  if (typeof v === 'number') return Number.isInteger(v) ? { intValue: String(v) } : { doubleValue: v };
  if (Array.isArray(v)) return { arrayValue: { values: v.map(value) } };
  return { stringValue: String(v) };
};
const attrs = (o) => Object.entries(o || {}).map(([key, v]) => ({ key, value: value(v) }));
const spans = exporter.getFinishedSpans().map((s) => ({
  traceId: s.spanContext().traceId,
  spanId: s.spanContext().spanId,
  parentSpanId: s.parentSpanContext?.spanId,
  name: s.name,
  kind: s.kind + 1,
  startTimeUnixNano: ns(s.startTime),
  endTimeUnixNano: ns(s.endTime),
  attributes: attrs(s.attributes),
  events: s.events.map((e) => ({ name: e.name, timeUnixNano: ns(e.time), attributes: attrs(e.attributes) })),
  status: s.status.code ? { code: s.status.code } : {},
}));
console.log(JSON.stringify({
  resourceSpans: [{
    resource: { attributes: attrs({ 'service.name': 'next-chat', 'telemetry.sdk.language': 'nodejs' }) },
    scopeSpans: [{ scope: { name: 'ai' }, spans }],
  }],
}, null, 1));
