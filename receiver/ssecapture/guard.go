// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package ssecapture

import (
	"context"
	"fmt"
	"strconv"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/confighttp"

	"github.com/streamstall/streamstall/internal/hedgecore"
	"github.com/streamstall/streamstall/receiver/ssecapture/internal/guard"
	"github.com/streamstall/streamstall/receiver/ssecapture/internal/proxy"
)

// newGuard builds the proxy's guard from its configuration: a rule per
// model entry over the top-level one, alternates' clients from confighttp,
// one set of client budgets shared by the rules that give none of their
// own.
func (r *sseCaptureReceiver) newGuard(ctx context.Context, host component.Host, gc *GuardConfig, primary *confighttp.ClientConfig, set component.TelemetrySettings) (*guard.Guard, error) {
	top := gc.rule()
	shared := hedgecore.NewClientBudgets(top.Budget.clientBudgets())
	def, err := r.guardRule(ctx, host, set, "", top, shared)
	if err != nil {
		return nil, err
	}
	models := make([]guard.Rule, 0, len(gc.Models))
	for i := range gc.Models {
		m := &gc.Models[i]
		rule, err := r.guardRule(ctx, host, set, m.Model, m.over(top), shared)
		if err != nil {
			return nil, fmt.Errorf("models[%d]: %w", i, err)
		}
		models = append(models, rule)
	}
	var fleet *guard.Fleet
	if gc.Advisor.HasValue() {
		if fleet, err = r.newFleet(ctx, host, gc.Advisor.Get(), set); err != nil {
			return nil, err
		}
	}
	r.fleet = fleet
	return guard.New(guard.Settings{
		Default: def,
		Models:  models,
		AutoStall: guard.AutoStall{
			Multiple: gc.AutoStall.Multiple, Floor: gc.AutoStall.Floor, Ceiling: gc.AutoStall.Ceiling,
			MinSamples: gc.AutoStall.MinSamples,
		},
		Clock: r.clock,
		Fleet: fleet,
		PrimaryCredential: func() guard.PrimaryCredential {
			headers, own := ownCredential(primary)
			return guard.PrimaryCredential{Own: own, Headers: headers}
		}(),
	}), nil
}

// newFleet builds the source of the guard's fleet advice; Start fetches.
func (r *sseCaptureReceiver) newFleet(ctx context.Context, host component.Host, ac *AdvisorConfig, set component.TelemetrySettings) (*guard.Fleet, error) {
	u, err := ac.adviceURL()
	if err != nil {
		return nil, fmt.Errorf("proxy: guard: advisor: %w", err)
	}
	cc := ac.ClientConfig
	cc.Timeout = 0 // the fetch's own timeout bounds it, body included
	client, err := cc.ToClient(ctx, host.GetExtensions(), set)
	if err != nil {
		return nil, fmt.Errorf("proxy: guard: advisor client: %w", err)
	}
	return guard.NewFleet(guard.FleetSettings{
		URL: u, Client: client, Interval: ac.Interval, Timeout: ac.Timeout, MaxAge: ac.MaxAge,
		Clock: r.clock, Logger: r.settings.Logger,
	}), nil
}

func (r *sseCaptureReceiver) guardRule(ctx context.Context, host component.Host, set component.TelemetrySettings, model string, gr guardRule,
	shared *hedgecore.ClientBudgets,
) (guard.Rule, error) {
	rule := guard.Rule{
		Model:                 model,
		StallTimeout:          gr.StallTimeout.Duration(),
		ReasoningStallTimeout: gr.ReasoningStallTimeout.Duration(),
		TTFTTimeout:           gr.TTFTTimeout,
		Delay:                 gr.Delay.Duration(),
		AutoDelay:             gr.Delay.Auto(),
		Quantile:              gr.Quantile,
		FallbackDelay:         gr.FallbackDelay,
		MinSamples:            gr.MinSamples,
		MaxAttempts:           gr.MaxAttempts,
		Budgets:               shared,
		IPv6Prefix:            gr.Budget.IPv6PrefixLength,
	}
	if gr.OwnBudget {
		rule.Budgets = hedgecore.NewClientBudgets(gr.Budget.clientBudgets())
	}
	if gr.StallTimeout.Auto() {
		rule.StallTimeout, rule.AutoStall = guard.AutoTimeout, true
	}
	if gr.ReasoningStallTimeout.Auto() {
		rule.ReasoningStallTimeout, rule.AutoStall = guard.AutoTimeout, true
	}
	for i := range gr.Alternates {
		a := &gr.Alternates[i]
		u, err := parseEndpoint(a.Endpoint)
		if err != nil {
			return guard.Rule{}, fmt.Errorf("proxy: guard: hedge.alternates[%d]: %w", i, err)
		}
		client, err := a.ToClient(ctx, host.GetExtensions(), set)
		if err != nil {
			return guard.Rule{}, fmt.Errorf("proxy: guard: hedge.alternates[%d] client: %w", i, err)
		}
		port, err := strconv.ParseInt(u.Port(), 10, 64)
		if err != nil {
			port = 80
			if u.Scheme == "https" {
				port = 443
			}
		}
		rule.Alternates = append(rule.Alternates, guard.Upstream{
			URL: u, Transport: proxy.HeaderTimeout(client.Transport, a.Timeout), Address: u.Hostname(), Port: port,
			ForwardClientCredentials: a.ForwardClientCredentials,
			OwnCredential:            a.ownCredential(),
			ServeCredentialFailures:  a.ServeCredentialFailures,
		})
	}
	return rule, nil
}
