// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"time"

	"github.com/streamstall/streamstall/internal/hedgecore"
)

// Policy names, in table order.
const (
	nameNoHedge     = "no hedging"
	nameTTFTOnly    = "hedge on TTFT at p95 only (LLM gateways today)"
	nameWatchdog120 = "watchdog 120 s + retry (LangChain)"
	nameWatchdog300 = "watchdog 300 s + retry (Codex CLI)"
	nameStreaming   = "streamstall streaming (TTFT race, commit, watchdog 20 s + retry)"
	nameBuffered    = "streamstall buffered (TTFT race, stall_after 5 s)"
	nameContinue    = "streamstall continuation (TTFT race, stall_after 5 s)"
	nameGuard       = "sse_capture proxy guard (TTFT race on an alternate, 2 attempts, stall_timeout 20 s + client retry)"
)

// adaptive is the hedge package's default delay: p95 of recent TTFT per
// source, 2 s until 20 samples are in.
func adaptive() hedgecore.Config {
	return hedgecore.Config{
		Adaptive: true, Quantile: hedgecore.DefaultQuantile, Delay: 2 * time.Second,
		Window: hedgecore.DefaultWindow, MinSamples: hedgecore.DefaultMinSamples,
	}
}

func with(c hedgecore.Config, f func(*hedgecore.Config)) hedgecore.Config {
	f(&c)
	return c
}

func policiesW1() []policySpec {
	return []policySpec{
		{name: nameNoHedge, cfg: hedgecore.Config{MaxAttempts: 1}},
		{name: nameTTFTOnly, cfg: with(adaptive(), func(c *hedgecore.Config) {
			c.MaxAttempts, c.MaxTokens, c.TokenRatio = 2, 10, 0.1
		})},
		{name: nameWatchdog120, cfg: hedgecore.Config{MaxAttempts: 1, StallTimeout: 120 * time.Second}, retries: 2},
		{name: nameWatchdog300, cfg: hedgecore.Config{MaxAttempts: 1, StallTimeout: 300 * time.Second}, retries: 5},
		{name: nameStreaming, cfg: with(adaptive(), func(c *hedgecore.Config) {
			c.MaxAttempts, c.MaxTokens, c.TokenRatio, c.StallTimeout = 3, 100, 0.12, 20*time.Second
		}), retries: 2},
		{name: nameBuffered, buffered: true, retries: 2, cfg: with(adaptive(), func(c *hedgecore.Config) {
			c.MaxAttempts, c.MaxTokens, c.TokenRatio = 3, 100, 0.12
			c.StallAfter, c.StallTimeout = 5*time.Second, 120*time.Second
		})},
		{name: nameContinue, retries: 2, cfg: with(adaptive(), func(c *hedgecore.Config) {
			c.MaxAttempts, c.MaxTokens, c.TokenRatio = 3, 100, 0.12
			c.StallAfter, c.StallTimeout, c.Continuation = 5*time.Second, 120*time.Second, true
		})},
		guardSpec(guardW1),
	}
}

// guardRule is the part of the sse_capture proxy guard's configuration
// (proxy.guard, one alternate) that shapes its decisions.
type guardRule struct {
	stallTimeout, ttftTimeout time.Duration
	delay                     time.Duration // fixed hedge.delay; 0 with autoDelay false: off
	autoDelay                 bool          // hedge.delay: auto
	quantile                  float64
	fallbackDelay             time.Duration
	minSamples                int
	maxAttempts               int
	maxTokens, tokenRatio     float64
	sharedMaxTokens           float64
}

// guardW1 is the guard with hedge.delay auto and its defaults (p95, 2 s
// until 20 samples, 2 attempts, budget 100 tokens at 0.1 per client under
// 1000 shared), one alternate, a
// 30 s ttft_timeout and the streaming row's 20 s watchdog, so that the two
// rows differ in the guard's defaults, not in the watchdog.
var guardW1 = guardRule{
	stallTimeout: 20 * time.Second, ttftTimeout: 30 * time.Second,
	autoDelay: true, quantile: 0.95, fallbackDelay: 2 * time.Second, minSamples: 20,
	maxAttempts: 2, maxTokens: 100, tokenRatio: 0.1, sharedMaxTokens: 1000,
}

// guardW2 is guardW1 tuned for W2 as the streamstall rows are: the p78 delay
// and a 30 % budget.
var guardW2 = func() guardRule {
	g := guardW1
	g.quantile, g.tokenRatio = w2Quantile, 0.3
	return g
}()

// guardSpec is the proxy guard's policy on the simulated sources. The
// guard's session (receiver/ssecapture/internal/guard) runs attempts over
// real HTTP upstreams and sits in an internal package this command cannot
// import, so the simulator drives hedgecore.Race, through the same
// hedgecore.Driver loop, with the configuration the guard builds, field for
// field as its newPolicy does, and with its semantics:
//   - streaming (Race.Reset(policy, false)): the first attempt with content
//     commits, the others are cancelled, and after commit the guard never
//     switches, so there is no stall_after and no continuation;
//   - hedge.delay off is NoTTFTHedge; auto is the adaptive delay at
//     hedge.quantile with fallback_delay until min_samples, in the default
//     window;
//   - ttft_timeout is the race's TTFT timeout;
//   - the watchdog after commit: the guard arms its timer at
//     Policy.StallDeadline of the last content chunk, ends the stream with
//     the shape's error frame when it fires and settles the race with
//     Fail(committed, Stalled), which charges the budget as the race's own
//     watchdog (Advance, at the same deadline) does here;
//   - budget: the guard's calls draw on their client's bucket
//     (hedgecore.ClientBudgets of max_tokens and token_ratio under
//     shared_max_tokens); the simulated caller is one client of one proxy.
//
// The proxy ends a stalled stream with an error the SDKs raise; the row's
// caller retries such a call up to 2 times, as the streaming row's does.
func guardSpec(g guardRule) policySpec {
	cfg := hedgecore.Config{
		Delay:                 g.delay,
		MaxAttempts:           g.maxAttempts,
		StallTimeout:          g.stallTimeout,
		ReasoningStallTimeout: 0, // reasoning_stall_timeout unset: stall_timeout
		TTFTTimeout:           g.ttftTimeout,
		NoTTFTHedge:           g.delay <= 0 && !g.autoDelay,
	}
	if g.autoDelay {
		cfg.Adaptive, cfg.Quantile, cfg.Delay, cfg.MinSamples = true, g.quantile, g.fallbackDelay, g.minSamples
	}
	clients := &hedgecore.ClientBudgetConfig{MaxTokens: g.maxTokens, TokenRatio: g.tokenRatio, SharedMaxTokens: g.sharedMaxTokens}
	return policySpec{name: nameGuard, cfg: cfg, retries: 2, clients: clients}
}

// w2Quantile is the delay quantile of the streamstall policies on W2. A
// hedge only helps if it fires before the slow mode, so the quantile must sit
// below the fast mode's share (80 %); p95 lands inside the slow mode.
const w2Quantile = 0.78

// streamstallW2 is the streaming policy of W2 at a budget: up to three
// attempts at staggered delays of p78 each.
func streamstallW2(ratio float64) policySpec {
	return policySpec{name: nameStreaming, retries: 2, cfg: with(adaptive(), func(c *hedgecore.Config) {
		c.Quantile, c.MaxAttempts, c.MaxTokens, c.TokenRatio = w2Quantile, 3, 100, ratio
		c.StallTimeout = 20 * time.Second
	})}
}

// policiesW2 are the W1 policies with the streamstall ones and the proxy
// guard tuned for W2: the p78 delay and a 30 % budget.
func policiesW2() []policySpec {
	specs := policiesW1()
	specs[4] = streamstallW2(0.3)
	for i := 5; i < len(specs); i++ {
		if specs[i].name == nameGuard {
			specs[i] = guardSpec(guardW2)
			continue
		}
		specs[i].cfg.Quantile, specs[i].cfg.TokenRatio = w2Quantile, 0.3
	}
	return specs
}
