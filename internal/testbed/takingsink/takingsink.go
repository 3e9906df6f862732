// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

// Package takingsink is a traces consumer that takes what it is given as its
// own, as batch and other asynchronous consumers do, so that tests can prove
// a receiver reads nothing of the data after handing it on.
package takingsink // import "github.com/streamstall/streamstall/internal/testbed/takingsink"

import (
	"context"
	"sync"

	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// Sink moves the spans out of every batch it is given: at once (as batch
// does), or, with Async, in a goroutine of its own after ConsumeTraces has
// returned. Either way, whoever reads a batch after handing it on reads what
// is no longer theirs: a wrong count, and a data race under -race. Err is
// what ConsumeTraces returns.
type Sink struct {
	Async bool
	Err   error

	wg    sync.WaitGroup
	mu    sync.Mutex
	spans int
}

var _ consumer.Traces = (*Sink)(nil)

// Capabilities says the sink mutates what it is given.
func (s *Sink) Capabilities() consumer.Capabilities {
	return consumer.Capabilities{MutatesData: true}
}

// ConsumeTraces takes td's spans.
func (s *Sink) ConsumeTraces(_ context.Context, td ptrace.Traces) error {
	take := func() {
		own := ptrace.NewTraces()
		td.ResourceSpans().MoveAndAppendTo(own.ResourceSpans())
		s.mu.Lock()
		s.spans += own.SpanCount()
		s.mu.Unlock()
	}
	if s.Async {
		s.wg.Go(take)
	} else {
		take()
	}
	return s.Err
}

// Taken waits for the asynchronous takes and returns how many spans the
// sink took.
func (s *Sink) Taken() int {
	s.wg.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.spans
}
