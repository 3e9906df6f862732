// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

// Package semconv holds every attribute, event and metric name of the
// streamstall contract (docs/contract.md sections 3 to 6) in one place, so that the
// receiver, the processor, the connector and the hedging client can never
// disagree on a spelling.
package semconv

// StreamNamespace begins every llm.stream.* name: the figures only the stall
// processor writes, and what the receiver records about chunks and frames.
// No client may set an attribute under it.
const StreamNamespace = "llm.stream."

// Chunk events (docs/contract.md section 3).
const (
	// EventChunk is the chunk event name streamstall emits (OpenLLMetry >= 0.55).
	EventChunk = "gen_ai.content.completion.chunk"
	// EventChunkLegacy is the chunk event name of older OpenLLMetry and Cohere.
	EventChunkLegacy = "llm.content.completion.chunk"
	// EventKeepalive records a non-content frame; it is never a chunk.
	EventKeepalive = "llm.stream.keepalive"

	// AttrChunkKind says what a content chunk carried.
	AttrChunkKind      = "llm.stream.chunk.kind"
	ChunkKindText      = "text"
	ChunkKindToolCall  = "tool_call"
	ChunkKindReasoning = "reasoning"

	// AttrFrameKind says what a recorded non-content frame was, on
	// llm.stream.keepalive events: keepalive, meta, done or error.
	AttrFrameKind = "llm.stream.frame.kind"

	// AttrOversizedFrames counts the SSE frames of a proxied stream that
	// exceeded the parser's size limit: they reached the client untouched
	// but were skipped by telemetry (int, present when not zero). It is not
	// a figure: the proxy records it from what it saw.
	AttrOversizedFrames = "llm.stream.oversized_frames"

	// AttrCapture says which sse_capture listener made a span: proxy (the
	// collector measured the stream itself) or ingest (a client reported
	// it). Ingest refuses client llm.stream.* attributes, so an ingest client
	// cannot pass its records off as the proxy's; hedge_advisor learns from
	// ingest spans only when told to.
	AttrCapture   = "llm.stream.capture"
	CaptureProxy  = "proxy"
	CaptureIngest = "ingest"

	// AttrCaptureError says why the proxy could not read all of a response's
	// frames although the client got every byte (a content coding it does
	// not decode, a decoded body over its limit, a body that does not
	// decode): the chunk events stop where capture stopped. Absent when
	// capture went well. It is not a figure.
	AttrCaptureError = "llm.stream.capture_error"
	// AttrStallTimeoutMs is the stall timeout (double, ms) the proxy's
	// guard watched a committed stream with: the configured one, or the
	// learned one of stall_timeout: auto. It is not a figure.
	AttrStallTimeoutMs = "llm.stream.stall_timeout_ms"
	// AttrStallTimeoutSource says where a learned stall timeout came from:
	// the fleet's advice, the proxy's own learning, or the floor. Absent
	// for a configured timeout.
	AttrStallTimeoutSource    = "llm.stream.stall_timeout_source"
	StallTimeoutSourceAdvisor = "advisor"
	StallTimeoutSourceLocal   = "local"
	StallTimeoutSourceFloor   = "floor"
)

// Elided chunk events (docs/contract.md section 3): past max_chunk_events,
// the receiver keeps the chunk events the figures need and counts the
// others on the kept event that follows them. None is a figure.
const (
	// AttrChunkElided, on a chunk event, counts the chunks elided just
	// before it (int, present when not zero); every gap among and around
	// them was at most the span's keep_gaps_above_ms.
	AttrChunkElided = "llm.stream.chunk.elided"
	// AttrChunkElidedReasoning counts the reasoning chunks among them (int,
	// present when not zero).
	AttrChunkElidedReasoning = "llm.stream.chunk.elided_reasoning"
	// AttrChunkEventsElided, on the span, counts every elided chunk (int).
	AttrChunkEventsElided = "llm.stream.chunk_events.elided"
	// AttrChunkEventsKeepGapsAboveMs, on the span, is the gap (double, ms)
	// above which both chunks of a gap were kept: the figures are exact for
	// any stall threshold at least as long.
	AttrChunkEventsKeepGapsAboveMs = "llm.stream.chunk_events.keep_gaps_above_ms"
	// AttrKeepaliveEventsDropped, on the span, counts the non-content
	// frames not recorded past max_chunk_events (int, present when not zero).
	AttrKeepaliveEventsDropped = "llm.stream.keepalive_events.dropped"
)

// DefaultChunkEventNames are the chunk event names recognised by default.
func DefaultChunkEventNames() []string { return []string{EventChunk, EventChunkLegacy} }

// Marker events (docs/contract.md section 3): instrumentations that record
// no event per chunk but mark the first chunk and the end of the stream. The
// Vercel AI SDK (experimental_telemetry) puts both on its
// ai.streamText.doStream and ai.streamObject.doStream spans.
const (
	// EventVercelFirstChunk marks the first part of the provider stream.
	EventVercelFirstChunk = "ai.stream.firstChunk"
	// EventVercelFinish marks the finish part of the provider stream.
	EventVercelFinish = "ai.stream.finish"
)

// EventOpenInferenceFirstToken is the one event OpenInference's
// instrumentations record on a streamed call, on its first streamed item
// (the role frame of Chat Completions, response.created of the Responses
// API): a marker of the stream's first frame, not of its first content.
const EventOpenInferenceFirstToken = "First Token Stream Event"

// DefaultFirstChunkMarkerNames are the first-chunk marker event names
// recognised by default.
func DefaultFirstChunkMarkerNames() []string {
	return []string{EventVercelFirstChunk, EventOpenInferenceFirstToken}
}

// DefaultFinishMarkerNames are the finish marker event names recognised by
// default.
func DefaultFinishMarkerNames() []string { return []string{EventVercelFinish} }

// GenAI attributes read or written by streamstall (OpenTelemetry semantic
// conventions, with the fallbacks of docs/contract.md section 3).
const (
	AttrProviderName          = "gen_ai.provider.name"
	AttrSystem                = "gen_ai.system" // older name of gen_ai.provider.name
	AttrOperationName         = "gen_ai.operation.name"
	AttrRequestModel          = "gen_ai.request.model"
	AttrResponseModel         = "gen_ai.response.model"
	AttrResponseID            = "gen_ai.response.id"
	AttrResponseFinishReasons = "gen_ai.response.finish_reasons"
	AttrUsageInputTokens      = "gen_ai.usage.input_tokens"
	AttrUsageOutputTokens     = "gen_ai.usage.output_tokens"
	AttrTimeToFirstChunk      = "gen_ai.response.time_to_first_chunk" // seconds
	AttrRequestStream         = "gen_ai.request.stream"
	AttrServerAddress         = "server.address"
	AttrServerPort            = "server.port"
	AttrHTTPStatusCode        = "http.response.status_code"
	AttrErrorType             = "error.type"
	AttrServiceName           = "service.name"
	AttrServiceInstanceID     = "service.instance.id"
)

// Server timings (docs/contract.md section 7): the durations an upstream
// reports for its own work (Ollama does, on its last frame), recorded by the
// proxy as it read them, doubles in milliseconds, each present when
// reported. Beside the span's own times they tell the engine's time from the
// network's and the queue's. They are not figures: no formula derives them.
const (
	AttrServerTotalMs      = "llm.server.total_ms"       // the whole request
	AttrServerLoadMs       = "llm.server.load_ms"        // loading the model
	AttrServerPromptEvalMs = "llm.server.prompt_eval_ms" // evaluating the prompt (prefill)
	AttrServerEvalMs       = "llm.server.eval_ms"        // generating the output (decode)
)

// Attributes of other instrumentations that stand for a gen_ai.* one, read
// as its fallbacks (docs/contract.md section 3): the Vercel AI SDK's ai.*
// names, OpenInference's llm.* names, and the older GenAI token names.
const (
	AttrVercelModelID          = "ai.model.id"
	AttrVercelModelProvider    = "ai.model.provider"
	AttrVercelResponseModel    = "ai.response.model"
	AttrVercelPromptTokens     = "ai.usage.promptTokens"     // AI SDK 4
	AttrVercelCompletionTokens = "ai.usage.completionTokens" // AI SDK 4
	AttrVercelInputTokens      = "ai.usage.inputTokens"      // AI SDK 5
	AttrVercelOutputTokens     = "ai.usage.outputTokens"     // AI SDK 5

	AttrOpenInferenceModelName        = "llm.model_name"
	AttrOpenInferenceProvider         = "llm.provider"
	AttrOpenInferenceSystem           = "llm.system"
	AttrOpenInferencePromptTokens     = "llm.token_count.prompt"
	AttrOpenInferenceCompletionTokens = "llm.token_count.completion"

	AttrUsagePromptTokensLegacy     = "gen_ai.usage.prompt_tokens"
	AttrUsageCompletionTokensLegacy = "gen_ai.usage.completion_tokens"
)

// Derived stream figures (docs/contract.md section 4). Durations are doubles in milliseconds.
const (
	AttrChunkCount         = "llm.stream.chunk_count"
	AttrTTFTMs             = "llm.stream.ttft_ms"
	AttrGenerationMs       = "llm.stream.generation_ms"
	AttrStallThresholdMs   = "llm.stream.stall_threshold_ms"
	AttrStallMs            = "llm.stream.stall_ms"
	AttrStallCount         = "llm.stream.stall_count"
	AttrMaxStallMs         = "llm.stream.max_stall_ms"
	AttrActiveGenerationMs = "llm.stream.active_generation_ms"
	AttrBurst              = "llm.stream.burst"
	AttrActiveTPS          = "llm.stream.active_tps"
	AttrStallEventsDropped = "llm.stream.stall_events_dropped"

	// Figures of the first answer chunk and of reasoning: an answer chunk is
	// a chunk whose llm.stream.chunk.kind is not reasoning.
	AttrTimeToFirstAnswerMs = "llm.stream.time_to_first_answer_ms"
	AttrReasoningMs         = "llm.stream.reasoning_ms"
	AttrReasoningChunkCount = "llm.stream.reasoning_chunk_count"

	// AttrEvidence says what a figure set was derived from when it was not
	// one event per chunk: EvidenceMarkers, a first-chunk marker and maybe a
	// finish marker. Absent on figures derived from chunk events.
	AttrEvidence    = "llm.stream.evidence"
	EvidenceMarkers = "markers"
	// EvidenceFrames: one chunk event per frame of the stream, content or
	// not (OpenLLMetry): the opening frames cannot be told from content, so
	// TTFT is unknown and the figures start after the opening burst.
	EvidenceFrames = "frames"
	// EvidenceFrameMarkers: the first-chunk marker marks the stream's first
	// frame, not its first content (the Vercel AI SDK's Responses
	// provider): no figure is known.
	EvidenceFrameMarkers = "frame_markers"

	// AttrStallCutMs is the silence (double, ms) a stall cut ended the
	// stream in, from its last chunk to the span end: a lower bound of its
	// last stall, which stall_ms, stall_count and max_stall_ms include.
	AttrStallCutMs = "llm.stream.stall_cut_ms"
	// AttrFiguresSeal is the stall processor's mark (bytes) that it derived
	// a span's figures from the chunk events on it, in this process: the
	// stall_metrics connector of the same collector records such a span
	// without judging its chunk events again.
	AttrFiguresSeal = "llm.stream.figures.seal"

	// EventStall marks one stall, stamped at the chunk that precedes the silence.
	EventStall               = "llm.stream.stall"
	AttrStallEventDurationMs = "llm.stream.stall.duration_ms"
	AttrStallEventAfterChunk = "llm.stream.stall.after_chunk"
	AttrStallEventGaps       = "llm.stream.stall.gaps"
	// AttrStallEventCut (bool, written only as true) marks the stall a
	// stall cut ended the stream in: its duration is a lower bound.
	AttrStallEventCut = "llm.stream.stall.cut"
)

// Marks of a stream a stall cut ended (docs/contract.md section 4): the
// proxy's guard and the hedging client write error.type stall_timeout and
// llm.stream.stall_timeout_ms on it.
const ErrorTypeStallTimeout = "stall_timeout"

// ErrorTypeEmptyAnswer is the error.type of an attempt of the proxy's guard
// or the hedging client whose stream ended before any content with no
// finish reason ("data: [DONE]" alone): it failed, and another attempt
// answered or the call failed with it.
const ErrorTypeEmptyAnswer = "empty_answer"

// AttrOpenLLMetryIsStreaming is OpenLLMetry's request attribute (bool) of a
// streamed call, whose chunk events are one per frame.
const AttrOpenLLMetryIsStreaming = "llm.is_streaming"

// VercelResponsesProviderSuffix ends the ai.model.provider of the Vercel AI
// SDK's Responses providers (openai.responses), whose ai.stream.firstChunk
// fires on the response.created frame.
const VercelResponsesProviderSuffix = ".responses"

// Hedging attributes (docs/contract.md section 5).
const (
	AttrHedgeGroupID         = "llm.hedge.group_id"
	AttrHedgeAttempt         = "llm.hedge.attempt"
	AttrHedgeTrigger         = "llm.hedge.trigger"
	AttrHedgeOutcome         = "llm.hedge.outcome"
	AttrHedgeLoser           = "llm.hedge.loser"
	AttrHedgeOutcomeInferred = "llm.hedge.outcome_inferred"
	// AttrHedgeDelayMs is the hedge delay (double, ms) armed when the
	// attempt started in the TTFT race; AttrHedgeDelaySource where it came
	// from.
	AttrHedgeDelayMs     = "llm.hedge.delay_ms"
	AttrHedgeDelaySource = "llm.hedge.delay_source"

	// AttrHedgeWastedSource says where a loser's wasted output tokens came
	// from, on llm.hedge.wasted_output_tokens: its usage, or its content
	// chunk count when it reported no usage.
	AttrHedgeWastedSource   = "llm.hedge.wasted.source"
	HedgeWastedSourceUsage  = "usage"
	HedgeWastedSourceChunks = "chunks"

	HedgeTriggerTTFT  = "ttft"
	HedgeTriggerStall = "stall"
	HedgeTriggerError = "error"

	HedgeDelaySourceFleet    = "fleet"
	HedgeDelaySourceLocal    = "local"
	HedgeDelaySourceFallback = "fallback"

	HedgeOutcomeWinner = "winner"
	HedgeOutcomeLoser  = "loser"
)

// Metrics of the stall_metrics connector (docs/contract.md section 6).
const (
	// The GenAI histograms under their semantic conventions v1.41 names
	// (metric_names: stable) and under the names of the conventions' main
	// branch (metric_names: latest).
	MetricTimeToFirstChunk         = "gen_ai.client.operation.time_to_first_chunk"
	MetricTimePerOutputChunk       = "gen_ai.client.operation.time_per_output_chunk"
	MetricTimeToFirstChunkLatest   = "gen_ai.client.inference.time_to_first_chunk"
	MetricTimePerOutputChunkLatest = "gen_ai.client.inference.time_per_output_chunk"

	MetricTimeToFirstAnswer  = "llm.stream.time_to_first_answer"
	MetricGenerationDuration = "llm.stream.generation.duration"
	MetricActiveGenDuration  = "llm.stream.active_generation.duration"
	MetricStallDuration      = "llm.stream.stall.duration"
	MetricCalls              = "llm.stream.calls"
	MetricHedgeAttempts      = "llm.hedge.attempts"
	MetricHedgeWastedTokens  = "llm.hedge.wasted_output_tokens"
	MetricHedgeWastedTime    = "llm.hedge.wasted_duration"

	AttrStalled        = "llm.stream.stalled"
	AttrMetricOverflow = "otel.metric.overflow"
)
