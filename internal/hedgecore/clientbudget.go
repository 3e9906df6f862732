// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package hedgecore

import (
	"container/list"
	"sync"
)

// DefaultMaxClients bounds the client buckets of a ClientBudgets by
// default: a proxy serving more clients than that at once forgets the
// least recently seen one first.
const DefaultMaxClients = 1000

// ClientBudgetConfig configures ClientBudgets.
type ClientBudgetConfig struct {
	// MaxTokens and TokenRatio are each client's bucket; MaxTokens <= 0:
	// no budget.
	MaxTokens  float64
	TokenRatio float64
	// SharedMaxTokens is the size of the bucket all clients' buckets also
	// draw on, at TokenRatio; <= 0: none.
	SharedMaxTokens float64
	// MaxClients bounds the client buckets held; <= 0 takes
	// DefaultMaxClients.
	MaxClients int
}

// ClientBudgets gives every client of a proxy a retryThrottling bucket of
// its own, so that one client's failures cannot take hedging and failover
// away from the others, under a shared bucket that keeps all of them
// together bounded: a hedge needs both to allow it and costs both, a
// success refunds both, and a failure costs the shared bucket only while
// the client's own still allows hedges. One client alone can thus spend at
// most half its own bucket of the shared one, and the shared bucket stops
// hedging for everyone only when many clients fail at once (an outage), as
// a single bucket would.
//
// The buckets held are bounded (MaxClients), the least recently used one
// dropped first; a client seen again after that starts on a full bucket,
// still under the shared one. Safe for concurrent use.
type ClientBudgets struct {
	maxTokens, ratio float64
	shared           *Budget
	maxClients       int

	mu sync.Mutex // guards lru and byClient
	// lru holds the *clientBucket values, the most recently used first.
	lru      list.List
	byClient map[string]*list.Element
}

type clientBucket struct {
	client string
	bucket *Budget
}

// NewClientBudgets returns the client buckets of cfg, nil (no budget) when
// cfg.MaxTokens <= 0.
func NewClientBudgets(cfg ClientBudgetConfig) *ClientBudgets {
	if NewBudget(cfg.MaxTokens, cfg.TokenRatio) == nil {
		return nil
	}
	c := &ClientBudgets{
		maxTokens: cfg.MaxTokens, ratio: cfg.TokenRatio,
		shared:     NewBudget(cfg.SharedMaxTokens, cfg.TokenRatio),
		maxClients: cfg.MaxClients,
		byClient:   map[string]*list.Element{},
	}
	if c.maxClients <= 0 {
		c.maxClients = DefaultMaxClients
	}
	return c
}

// For returns the bucket of client (nil on a nil ClientBudgets: no budget).
func (c *ClientBudgets) For(client string) *Budget {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.byClient[client]; ok {
		c.lru.MoveToFront(e)
		return e.Value.(*clientBucket).bucket
	}
	if c.lru.Len() >= c.maxClients {
		oldest := c.lru.Back()
		c.lru.Remove(oldest)
		delete(c.byClient, oldest.Value.(*clientBucket).client)
	}
	b := NewBudget(c.maxTokens, c.ratio)
	b.shared = c.shared
	c.byClient[client] = c.lru.PushFront(&clientBucket{client: client, bucket: b})
	return b
}

// Shared returns the bucket all clients' buckets draw on, nil for none.
func (c *ClientBudgets) Shared() *Budget {
	if c == nil {
		return nil
	}
	return c.shared
}

// Clients counts the client buckets held.
func (c *ClientBudgets) Clients() int {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lru.Len()
}
