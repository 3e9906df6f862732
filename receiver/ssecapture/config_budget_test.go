// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package ssecapture

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/streamstall/streamstall/internal/hedgecore"
)

func TestGuardClientBudgetDefaults(t *testing.T) {
	cfg, err := loadGuardConfig(t, "guard_empty")
	require.NoError(t, err)
	b := cfg.Proxy.Get().Guard.Get().Hedge.Budget
	assert.Zero(t, b.SharedMaxTokens, "0: ten times max_tokens")
	assert.Zero(t, b.MaxClients, "0: the default bound")
	assert.Zero(t, b.IPv6PrefixLength, "0: a /64")
	assert.Equal(t, hedgecore.ClientBudgetConfig{MaxTokens: 100, TokenRatio: 0.1, SharedMaxTokens: 1000}, b.clientBudgets())
	cb := hedgecore.NewClientBudgets(b.clientBudgets())
	for i := range hedgecore.DefaultMaxClients + 1 {
		cb.For(string(rune('a' + i)))
	}
	assert.Equal(t, 1000, cb.Clients(), "max_clients 0 holds 1000 client buckets")
}

func TestGuardClientBudgets(t *testing.T) {
	cfg, err := loadGuardConfig(t, "guard_client_budgets")
	require.NoError(t, err)
	g := cfg.Proxy.Get().Guard.Get()
	assert.Equal(t, BudgetConfig{MaxTokens: 50, TokenRatio: 0.2, SharedMaxTokens: 400, MaxClients: 5000, IPv6PrefixLength: 56}, g.Hedge.Budget)
	assert.Equal(t, hedgecore.ClientBudgetConfig{MaxTokens: 50, TokenRatio: 0.2, SharedMaxTokens: 400, MaxClients: 5000}, g.Hedge.Budget.clientBudgets())
	o3 := g.Models[0].over(g.rule())
	assert.True(t, o3.OwnBudget)
	assert.Zero(t, o3.Budget.IPv6PrefixLength, "a model's own budget keys its clients by its own prefix")
	assert.Equal(t, 56, g.rule().Budget.IPv6PrefixLength, "the top-level budget's, which the models without one of their own share")
	assert.Equal(t, hedgecore.ClientBudgetConfig{MaxTokens: 10, TokenRatio: 0.2, SharedMaxTokens: 100}, o3.Budget.clientBudgets(),
		"a model's own budget: its shared cap is ten times its max_tokens")
	assert.Nil(t, hedgecore.NewClientBudgets(BudgetConfig{TokenRatio: 0.1}.clientBudgets()), "max_tokens 0: no budget")
}

func TestGuardClientBudgetsValidate(t *testing.T) {
	_, err := loadGuardConfig(t, "guard_bad_client_budgets")
	require.Error(t, err)
	for _, msg := range []string{
		"proxy: guard: hedge.budget.shared_max_tokens 20 must be 0 (10 times max_tokens) or between max_tokens and 100000",
		"proxy: guard: hedge.budget.max_clients -1 must be between 0 (1000) and 100000",
		"proxy: guard: models[0]: hedge.budget.shared_max_tokens 200000 must be 0 (10 times max_tokens) or between max_tokens and 100000",
		"proxy: guard: models[0]: hedge.budget.max_clients 100001 must be between 0 (1000) and 100000",
		"proxy: guard: hedge.budget.ipv6_prefix_length -1 must be between 0 (64) and 128",
		"proxy: guard: models[0]: hedge.budget.ipv6_prefix_length 129 must be between 0 (64) and 128",
	} {
		assert.ErrorContains(t, err, msg)
	}
}
