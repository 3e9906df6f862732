// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	anthropicoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	openaioption "github.com/openai/openai-go/v3/option"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/streamstall/streamstall/hedge"
	"github.com/streamstall/streamstall/internal/testbed/fakellm"
)

// A call the demo makes through the proxy.
type plannedCall struct {
	api, model, profile string
	seed                uint64
}

// The mix of the field: most streams are steady, a good share stall mid-way
// (some with keepalives that must not hide the stall), a few arrive in one
// buffered burst or start slowly, and a few reason before they answer.
var profileMix = []struct {
	profile string
	weight  int
}{
	{fakellm.ProfileSteady, 40},
	{fakellm.ProfileStall, 30},
	{fakellm.ProfileStallKeepalive, 15},
	{fakellm.ProfileSlowFirst, 10},
	{fakellm.ProfileBurst, 5},
	{fakellm.ProfileReasoning, 8},
}

var models = []struct{ api, model string }{
	{"openai", "gpt-4o"}, {"openai", "gpt-4o-mini"}, {"anthropic", "claude-sonnet-4-5"},
}

func plan(o options) []plannedCall {
	rng := rand.New(rand.NewPCG(o.seed, 1))
	total := 0
	for _, p := range profileMix {
		total += p.weight
	}
	calls := make([]plannedCall, o.streams)
	for i := range calls {
		r := rng.IntN(total)
		for _, p := range profileMix {
			if r < p.weight {
				calls[i].profile = p.profile
				break
			}
			r -= p.weight
		}
		m := models[i%len(models)]
		calls[i].api, calls[i].model, calls[i].seed = m.api, m.model, o.seed*1000+uint64(i)
	}
	return calls
}

// sendTraffic streams every planned call through the proxy with the official
// SDKs, runs two hedged calls with the hedging client, and returns how many
// spans the collector should deliver.
func sendTraffic(ctx context.Context, st *stack, o options) (int, error) {
	calls := plan(o)
	httpClient := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: o.concurrency}}
	oa := openai.NewClient(openaioption.WithBaseURL(st.proxyURL+"/v1/"), openaioption.WithAPIKey("sk-demo-not-a-real-key"),
		openaioption.WithMaxRetries(0), openaioption.WithHTTPClient(httpClient))
	an := anthropic.NewClient(anthropicoption.WithBaseURL(st.proxyURL), anthropicoption.WithAPIKey("sk-ant-demo-not-a-real-key"),
		anthropicoption.WithMaxRetries(0), anthropicoption.WithHTTPClient(httpClient))

	var done, failed atomic.Int64
	progress := func() {
		fmt.Fprintf(os.Stderr, "\r  streams through the proxy: %d/%d done, %d failed", done.Load(), len(calls), failed.Load())
	}
	sem := make(chan struct{}, o.concurrency)
	var wg sync.WaitGroup
	for _, c := range calls {
		sem <- struct{}{}
		wg.Add(1)
		// fakellm draws a request's timing from its seed and its arrival
		// number, so each call waits for the previous one's response headers
		// (sent at once, before the first token): the calls arrive in plan
		// order and every run of the demo gets the same timings.
		arrived := make(chan struct{})
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := stream(ctx, oa, an, c, func() { close(arrived) }); err != nil {
				failed.Add(1)
			}
			done.Add(1)
			progress()
		}()
		<-arrived
		progress()
	}
	wg.Wait()
	fmt.Fprintln(os.Stderr)
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	hedgeSpans, err := hedgedCalls(ctx, st, o)
	if err != nil {
		return 0, fmt.Errorf("hedged calls: %w", err)
	}
	return len(calls) + hedgeSpans, nil
}

// stream makes one streaming call and reads it to the end, as a chat UI would.
// answered is called once the response headers are in (or the call failed).
func stream(ctx context.Context, oa openai.Client, an anthropic.Client, c plannedCall, answered func()) error {
	hdr := func(k, v string) (openaioption.RequestOption, anthropicoption.RequestOption) {
		return openaioption.WithHeader(k, v), anthropicoption.WithHeader(k, v)
	}
	op1, ap1 := hdr(fakellm.HeaderProfile, c.profile)
	op2, ap2 := hdr(fakellm.HeaderSeed, fmt.Sprint(c.seed))
	if c.api == "anthropic" {
		s := an.Messages.NewStreaming(ctx, anthropic.MessageNewParams{
			Model: c.model, MaxTokens: 1024,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Why do LLM streams stall?"))},
		}, ap1, ap2)
		answered()
		for s.Next() {
		}
		return s.Err()
	}
	s := oa.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
		Model:         c.model,
		Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Why do LLM streams stall?")},
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	}, op1, op2)
	answered()
	for s.Next() {
	}
	return s.Err()
}

// hedgedCalls runs the hedging client against fakellm directly (not through
// the proxy, which would record the same attempts twice) and exports its
// spans to the collector's OTLP receiver. It returns the spans it emitted.
func hedgedCalls(ctx context.Context, st *stack, _ options) (int, error) {
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(st.otlpURL+"/v1/traces"))
	if err != nil {
		return 0, err
	}
	var emitted atomic.Int64
	counter := spanCounter{&emitted}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithSpanProcessor(counter),
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", proxyService+"-gateway"))))
	defer func() { _ = tp.Shutdown(context.Background()) }()

	source := func(name, model, profile string) hedge.Source {
		h := http.Header{}
		h.Set(fakellm.HeaderProfile, profile)
		return hedge.NewOpenAIChatSource(hedge.Endpoint{Name: name, BaseURL: st.fakellmURL + "/v1", APIKey: "sk-demo", Model: model, Header: h})
	}
	req := hedge.Request{Messages: []hedge.Message{{Role: "user", Content: "Why do LLM streams stall?"}}, MaxTokens: 512}

	// 1. Streaming delivery, TTFT race: the primary is slow to start, the
	//    hedge starts after 300 ms and delivers first, so it commits.
	h, err := hedge.New([]hedge.Source{
		source("primary", "gpt-4o", fakellm.ProfileSlowFirst), source("secondary", "gpt-4o", fakellm.ProfileSteady),
	}, hedge.Delay(300*time.Millisecond), hedge.TracerProvider(tp))
	if err != nil {
		return 0, err
	}
	call, err := h.Stream(ctx, req)
	if err != nil {
		return 0, err
	}
	for call.Next() {
	}
	call.Close()
	if err := call.Err(); err != nil {
		return 0, err
	}

	// 2. Buffered delivery (an agent wants the whole message): the primary
	//    stalls mid-stream, so after 1 s of silence a fresh attempt starts on
	//    the other source and the first to complete wins.
	script := `{"ttft_ms":80,"gaps_ms":[10,10,10,10,10,60000,10,10]}`
	h, err = hedge.New([]hedge.Source{
		source("primary", "gpt-4o-mini", script), source("secondary", "gpt-4o-mini", fakellm.ProfileSteady),
	}, hedge.Delay(2*time.Second), hedge.StallAfter(time.Second), hedge.TracerProvider(tp))
	if err != nil {
		return 0, err
	}
	if _, err := h.Complete(ctx, req); err != nil {
		return 0, err
	}
	if err := tp.ForceFlush(ctx); err != nil {
		return 0, err
	}
	return int(emitted.Load()), nil
}

// spanCounter counts the spans the hedging client ended.
type spanCounter struct{ n *atomic.Int64 }

func (c spanCounter) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (c spanCounter) OnEnd(sdktrace.ReadOnlySpan)                     { c.n.Add(1) }
func (c spanCounter) Shutdown(context.Context) error                  { return nil }
func (c spanCounter) ForceFlush(context.Context) error                { return nil }
