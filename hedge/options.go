// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package hedge

import (
	"errors"
	"fmt"
	"time"

	"github.com/jonboulle/clockwork"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/streamstall/streamstall/internal/hedgecore"
)

// Defaults of a Hedger built without options.
const (
	DefaultDelayFallback = 2 * time.Second
	DefaultStallTimeout  = 120 * time.Second // LangChain's stream_chunk_timeout
	DefaultMaxAttempts   = 3
	DefaultMaxTokens     = 100
	DefaultTokenRatio    = 0.1
	// DefaultMaxChunkEvents bounds the chunk events of an attempt's span:
	// under the OpenTelemetry SDK's default of 128 events a span, which
	// drops the oldest past it (the first chunk, and the TTFT with it).
	DefaultMaxChunkEvents = 120
)

// Option configures a Hedger.
type Option func(*config)

type config struct {
	delay        time.Duration
	adaptive     bool
	quantile     float64
	window       time.Duration
	minSamples   int
	stallTimeout time.Duration
	stallAfter   time.Duration
	continuation bool
	maxTokens    float64
	tokenRatio   float64
	maxAttempts  int
	clock        clockwork.Clock
	tracer       trace.TracerProvider
	keepalives   bool
	maxEvents    int
	advice       *adviceConfig
}

func defaultConfig() config {
	return config{
		delay:        DefaultDelayFallback,
		adaptive:     true,
		quantile:     hedgecore.DefaultQuantile,
		window:       hedgecore.DefaultWindow,
		minSamples:   hedgecore.DefaultMinSamples,
		stallTimeout: DefaultStallTimeout,
		maxTokens:    DefaultMaxTokens,
		tokenRatio:   DefaultTokenRatio,
		maxAttempts:  DefaultMaxAttempts,
		maxEvents:    DefaultMaxChunkEvents,
		clock:        clockwork.NewRealClock(),
		tracer:       noop.NewTracerProvider(),
	}
}

// Delay hedges after a fixed delay without content, instead of the default
// adaptive delay.
func Delay(d time.Duration) Option {
	return func(c *config) { c.delay, c.adaptive = d, false }
}

// AdaptiveDelay hedges after the given quantile (default 0.95) of the recent
// time to first content of the source being waited for, learned per source
// with a DDSketch over two rotating one-minute windows. Until 20 samples are
// in, it waits fallback (default 2 s).
func AdaptiveDelay(quantile float64, fallback time.Duration) Option {
	return func(c *config) { c.adaptive, c.quantile, c.delay = true, quantile, fallback }
}

// StallTimeout is the inactivity watchdog: once content has started, a
// silence this long (keepalives do not count) ends the call with a
// *StallError. Zero disables it. Default 120 s.
func StallTimeout(d time.Duration) Option {
	return func(c *config) { c.stallTimeout = d }
}

// StallAfter is the mid-stream hedge trigger: a silence this long after
// content has started launches another attempt. In buffered delivery
// (Complete) it is a fresh attempt and the first to complete wins; in
// streaming delivery it is a continuation, and only with Continuation.
// Zero (the default) disables it.
func StallAfter(d time.Duration) Option {
	return func(c *config) { c.stallAfter = d }
}

// Continuation enables continuation hedges in streaming delivery: on a stall
// (StallAfter) or a broken stream after commit, another source is asked to
// continue the text already delivered, sent as an assistant prefix. The first
// of the two to deliver more content keeps the stream. Only text can be
// continued: after a tool-call or reasoning chunk it is off for the call.
func Continuation() Option {
	return func(c *config) { c.continuation = true }
}

// Budget sets the token bucket that bounds hedges and retries (gRPC
// retryThrottling): each costs a token and is allowed only while more than
// maxTokens/2 remain; a failed attempt costs a token; a successful call
// gives back tokenRatio, so in the long run extra attempts stay below
// tokenRatio per call. maxTokens <= 0 removes the bound. Default 100, 0.1:
// gRPC's usual 10 tokens leave a cushion of 5, which random runs of hedges
// exhaust (cmd/hedgesim shows the tail suffering from it).
func Budget(maxTokens, tokenRatio float64) Option {
	return func(c *config) { c.maxTokens, c.tokenRatio = maxTokens, tokenRatio }
}

// MaxAttempts bounds the attempts of one call, the primary included; it is
// clamped to 5 as in gRPC. Default 3.
func MaxAttempts(n int) Option {
	return func(c *config) { c.maxAttempts = n }
}

// withClock sets the clock of every timer and timestamp: a fake clock in
// tests. It is not exported, so that the clock library stays out of the API.
func withClock(clock clockwork.Clock) Option {
	return func(c *config) { c.clock = clock }
}

// TracerProvider makes the Hedger emit a span per call and a child span per
// attempt in the streamstall contract (docs/contract.md sections 3 and 5).
func TracerProvider(tp trace.TracerProvider) Option {
	return func(c *config) { c.tracer = tp }
}

// RecordKeepalives adds an llm.stream.keepalive event to the attempt span for
// every non-content frame (off by default: they are noise in a trace).
func RecordKeepalives() Option {
	return func(c *config) { c.keepalives = true }
}

// MaxChunkEvents bounds the chunk events of an attempt's span (default
// DefaultMaxChunkEvents, at least 4). Past it chunks are elided as the
// sse_capture receiver elides them (docs/contract.md section 3): the first
// chunk, the first answer and reasoning chunk, the last, and both chunks of
// every gap over 2 s are kept, and the span counts the rest, so that its
// figures stay exact. Raise it with the SDK's span event limit
// (sdktrace.WithSpanLimits, OTEL_SPAN_EVENT_COUNT_LIMIT), never above it:
// the SDK drops the oldest events past its limit.
func MaxChunkEvents(n int) Option {
	return func(c *config) { c.maxEvents = n }
}

func (c *config) validate() error {
	var errs []error
	if c.delay < 0 {
		errs = append(errs, fmt.Errorf("hedge delay %s is negative", c.delay))
	}
	if c.adaptive && (c.quantile <= 0 || c.quantile >= 1) {
		errs = append(errs, fmt.Errorf("delay quantile %v is not in (0, 1)", c.quantile))
	}
	if c.stallTimeout < 0 || c.stallAfter < 0 {
		errs = append(errs, errors.New("stall timeout and stall after must not be negative"))
	}
	if c.continuation && c.stallAfter == 0 {
		errs = append(errs, errors.New("continuation needs StallAfter"))
	}
	if c.stallAfter > 0 && c.stallTimeout > 0 && c.stallAfter >= c.stallTimeout {
		errs = append(errs, fmt.Errorf("stall after %s must be shorter than the stall timeout %s", c.stallAfter, c.stallTimeout))
	}
	if c.maxEvents < 4 {
		errs = append(errs, fmt.Errorf("max chunk events %d is below 4 (the first chunk, answer and reasoning chunk, and the last)", c.maxEvents))
	}
	if c.maxAttempts < 1 {
		errs = append(errs, fmt.Errorf("max attempts %d is below 1", c.maxAttempts))
	}
	if c.tokenRatio < 0 {
		errs = append(errs, fmt.Errorf("token ratio %v is negative", c.tokenRatio))
	}
	if c.advice != nil {
		if err := c.advice.validate(); err != nil {
			errs = append(errs, err)
		}
	}
	if c.clock == nil || c.tracer == nil {
		errs = append(errs, errors.New("clock and tracer provider must not be nil"))
	}
	return errors.Join(errs...)
}

func (c *config) core(sources int) hedgecore.Config {
	return hedgecore.Config{
		Sources:      sources,
		Delay:        c.delay,
		Adaptive:     c.adaptive,
		Quantile:     c.quantile,
		Window:       c.window,
		MinSamples:   c.minSamples,
		MaxTokens:    c.maxTokens,
		TokenRatio:   c.tokenRatio,
		MaxAttempts:  c.maxAttempts,
		StallTimeout: c.stallTimeout,
		StallAfter:   c.stallAfter,
		Continuation: c.continuation,
	}
}
