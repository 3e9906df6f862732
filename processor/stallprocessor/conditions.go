// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package stallprocessor // import "github.com/streamstall/streamstall/processor/stallprocessor"

import (
	"errors"
	"fmt"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/ottl"
	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/ottl/contexts/ottlspan"
	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/ottl/contexts/ottlspanevent"
	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/ottl/ottlfuncs"
	"go.opentelemetry.io/collector/component"
)

// conditions are the compiled OTTL conditions of a Config. Each list is an
// ottl.ConditionSequence (conditions OR-ed, failures handled by error_mode),
// or nil when the list is not configured: callers check for nil before
// building a transform context, so an unconfigured list costs nothing.
type conditions struct {
	spans      *ottl.ConditionSequence[*ottlspan.TransformContext]
	losers     *ottl.ConditionSequence[*ottlspan.TransformContext]
	chunkEvent *ottl.ConditionSequence[*ottlspanevent.TransformContext]
}

// compileConditions parses every OTTL condition of cfg; errors name the key.
// set.Logger receives the failures that error_mode ignore logs.
func compileConditions(cfg *Config, set component.TelemetrySettings) (*conditions, error) {
	var errs []error
	c := &conditions{}
	if len(cfg.Spans) > 0 || len(cfg.LoserConditions) > 0 {
		parser, err := ottlspan.NewParser(ottlfuncs.StandardConverters[*ottlspan.TransformContext](), set)
		if err != nil {
			return nil, fmt.Errorf("creating the ottl span parser: %w", err)
		}
		mode := ottlspan.WithConditionSequenceErrorMode(cfg.ErrorMode)
		if c.spans, err = spanSequence(&parser, cfg.Spans, set, mode); err != nil {
			errs = append(errs, fmt.Errorf("spans: %w", err))
		}
		if c.losers, err = spanSequence(&parser, cfg.LoserConditions, set, mode); err != nil {
			errs = append(errs, fmt.Errorf("loser_conditions: %w", err))
		}
	}
	if len(cfg.ChunkEvents.Conditions) > 0 {
		parser, err := ottlspanevent.NewParser(ottlfuncs.StandardConverters[*ottlspanevent.TransformContext](), set)
		if err != nil {
			return nil, fmt.Errorf("creating the ottl span event parser: %w", err)
		}
		conds, err := parser.ParseConditions(cfg.ChunkEvents.Conditions)
		if err != nil {
			errs = append(errs, fmt.Errorf("chunk_events::conditions: %w", err))
		} else {
			seq := ottlspanevent.NewConditionSequence(conds, set, ottlspanevent.WithConditionSequenceErrorMode(cfg.ErrorMode))
			c.chunkEvent = &seq
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return c, nil
}

// spanSequence parses raw into a span condition sequence; nil when raw is empty.
func spanSequence(parser *ottl.Parser[*ottlspan.TransformContext], raw []string, set component.TelemetrySettings, mode ottlspan.ConditionSequenceOption) (*ottl.ConditionSequence[*ottlspan.TransformContext], error) {
	if len(raw) == 0 {
		return nil, nil
	}
	conds, err := parser.ParseConditions(raw)
	if err != nil {
		return nil, err
	}
	seq := ottlspan.NewConditionSequence(conds, set, mode)
	return &seq, nil
}
