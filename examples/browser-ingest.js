// The page's side of examples/browser-ingest.yaml (docs/ingest.md): stream a chat answer from the
// page's backend, note when each content chunk arrives, and post those times to the sse_capture
// ingest listener with the attributes that stall_metrics makes its dimensions of.

// chatWithTiming streams an OpenAI-shaped chat completion (SSE) from chatURL, hands each content
// delta to onText as it arrives, posts the call's record to ingestURL and returns the answer.
export async function chatWithTiming({chatURL, ingestURL, provider, model, service, messages, onText = () => {}}) {
  const start = Date.now(), t0 = performance.now(), offsets = [];
  const res = await fetch(chatURL, {method: "POST", headers: {"Content-Type": "application/json"},
    body: JSON.stringify({model, messages, stream: true, stream_options: {include_usage: true}})});
  if (!res.ok) throw new Error(`chat: HTTP ${res.status}`);
  let text = "", usage, buf = "";
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  for (let r = await reader.read(); !r.done; r = await reader.read()) {
    buf = (buf + r.value).replace(/\r\n/g, "\n");
    // A network read can carry several SSE frames, or part of one: count frames, not reads.
    for (let end = buf.indexOf("\n\n"); end >= 0; end = buf.indexOf("\n\n")) {
      const frame = buf.slice(0, end);
      buf = buf.slice(end + 2);
      const data = frame.split("\n").filter((l) => l.startsWith("data:")).map((l) => l.slice(5).trim()).join("\n");
      if (data === "" || data === "[DONE]") continue; // keepalive comments, the end marker
      const chunk = JSON.parse(data);
      usage = chunk.usage ?? usage;
      const delta = chunk.choices?.[0]?.delta ?? {};
      const piece = delta.content || delta.reasoning_content || "";
      if (piece === "" && !delta.tool_calls) continue; // role-only and usage-only frames are no chunks
      offsets.push(performance.now() - t0);
      text += piece;
      onText(piece);
    }
  }
  const attributes = {"gen_ai.operation.name": "chat", "gen_ai.provider.name": provider,
    "gen_ai.request.model": model, "service.name": service};
  if (usage) attributes["gen_ai.usage.output_tokens"] = usage.completion_tokens;
  // Unix nanoseconds as decimal strings: a JavaScript number cannot hold them exactly.
  const nanos = (ms) => String(BigInt(start) * 1000000n + BigInt(Math.round(ms * 1e6)));
  const posted = await fetch(ingestURL, {method: "POST", headers: {"Content-Type": "application/json"},
    body: JSON.stringify({name: `chat ${model}`, start_time_unix_nano: nanos(0),
      end_time_unix_nano: nanos(performance.now() - t0), attributes, chunk_offsets_ms: offsets})});
  if (!posted.ok) throw new Error(`ingest: HTTP ${posted.status}: ${await posted.text()}`);
  return text;
}
