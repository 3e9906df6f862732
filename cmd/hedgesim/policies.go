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
	}
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

// policiesW2 are the W1 policies with the streamstall ones tuned for W2: the
// p78 delay and a 30 % budget.
func policiesW2() []policySpec {
	specs := policiesW1()
	specs[4] = streamstallW2(0.3)
	for i := 5; i < len(specs); i++ {
		specs[i].cfg.Quantile, specs[i].cfg.TokenRatio = w2Quantile, 0.3
	}
	return specs
}
