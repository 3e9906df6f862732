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

	// AttrStallTimeoutMs is the stall timeout (double, ms) the proxy's
	// guard watched a committed stream with: the configured one, or the
	// learned one of stall_timeout: auto. It is not a figure.
	AttrStallTimeoutMs = "llm.stream.stall_timeout_ms"
)

// DefaultChunkEventNames are the chunk event names recognised by default.
func DefaultChunkEventNames() []string { return []string{EventChunk, EventChunkLegacy} }

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

	// EventStall marks one stall, stamped at the chunk that precedes the silence.
	EventStall               = "llm.stream.stall"
	AttrStallEventDurationMs = "llm.stream.stall.duration_ms"
	AttrStallEventAfterChunk = "llm.stream.stall.after_chunk"
	AttrStallEventGaps       = "llm.stream.stall.gaps"
)

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
