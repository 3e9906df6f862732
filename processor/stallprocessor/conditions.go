package stallprocessor // import "github.com/streamstall/streamstall/processor/stallprocessor"

import (
	"context"
	"errors"
	"fmt"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/ottl"
	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/ottl/contexts/ottlspan"
	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/ottl/contexts/ottlspanevent"
	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/ottl/ottlfuncs"
	"go.opentelemetry.io/collector/component"
)

// anyOf is a list of OTTL conditions, OR-ed. An empty list is "not
// configured": callers check len before building a transform context.
type anyOf[K any] []*ottl.Condition[K]

// eval reports whether one condition holds. A condition that fails is handed
// to onError (error_mode) and, when that swallows it, counts as false.
func (c anyOf[K]) eval(ctx context.Context, tCtx K, onError func(error) error) (bool, error) {
	for _, cond := range c {
		ok, err := cond.Eval(ctx, tCtx)
		if err != nil {
			if err = onError(fmt.Errorf("evaluating condition %q: %w", cond.String(), err)); err != nil {
				return false, err
			}
			continue
		}
		if ok {
			return true, nil
		}
	}
	return false, nil
}

// conditions are the compiled OTTL conditions of a Config.
type conditions struct {
	spans      anyOf[*ottlspan.TransformContext]
	losers     anyOf[*ottlspan.TransformContext]
	chunkEvent anyOf[*ottlspanevent.TransformContext]
}

// compileConditions parses every OTTL condition of cfg; errors name the key.
func compileConditions(cfg *Config, set component.TelemetrySettings) (*conditions, error) {
	var errs []error
	c := &conditions{}
	if len(cfg.Spans) > 0 || len(cfg.LoserConditions) > 0 {
		parser, err := ottlspan.NewParser(ottlfuncs.StandardConverters[*ottlspan.TransformContext](), set)
		if err != nil {
			return nil, fmt.Errorf("creating the ottl span parser: %w", err)
		}
		if c.spans, err = parser.ParseConditions(cfg.Spans); err != nil {
			errs = append(errs, fmt.Errorf("spans: %w", err))
		}
		if c.losers, err = parser.ParseConditions(cfg.LoserConditions); err != nil {
			errs = append(errs, fmt.Errorf("loser_conditions: %w", err))
		}
	}
	if len(cfg.ChunkEvents.Conditions) > 0 {
		parser, err := ottlspanevent.NewParser(ottlfuncs.StandardConverters[*ottlspanevent.TransformContext](), set)
		if err != nil {
			return nil, fmt.Errorf("creating the ottl span event parser: %w", err)
		}
		if c.chunkEvent, err = parser.ParseConditions(cfg.ChunkEvents.Conditions); err != nil {
			errs = append(errs, fmt.Errorf("chunk_events::conditions: %w", err))
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return c, nil
}
