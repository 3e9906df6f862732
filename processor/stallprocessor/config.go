// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package stallprocessor // import "github.com/streamstall/streamstall/processor/stallprocessor"

import (
	"errors"
	"fmt"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/ottl"
	"go.opentelemetry.io/collector/component"
	"go.uber.org/zap"

	"github.com/streamstall/streamstall/internal/figures"
)

var _ component.Config = (*Config)(nil)

// Config is the configuration of the stall processor.
type Config struct {
	// StallThreshold is T of docs/contract.md section 4: a gap between two consecutive
	// chunks is a stall gap when it is strictly longer than this.
	StallThreshold time.Duration `mapstructure:"stall_threshold"`
	// ChunkEvents says which span events are content chunks.
	ChunkEvents ChunkEventsConfig `mapstructure:"chunk_events"`
	// MarkerEvents says which span events mark the first chunk and the
	// finish of a stream, on spans without chunk events.
	MarkerEvents figures.MarkerEventsConfig `mapstructure:"marker_events"`
	// Spans are OTTL span conditions, OR-ed: only spans matching one of them
	// are examined. Empty means every span is examined.
	Spans []string `mapstructure:"spans"`
	// LoserConditions are OTTL span conditions, OR-ed: a span matching one of
	// them is flagged llm.hedge.loser = true.
	LoserConditions []string `mapstructure:"loser_conditions"`
	// InferHedgeOutcome judges attempts of one llm.hedge.group_id that arrive
	// in the same batch without an outcome: the earliest first chunk wins.
	InferHedgeOutcome bool `mapstructure:"infer_hedge_outcome"`
	// MaxStallEvents bounds the llm.stream.stall events written per span; the
	// rest are counted in llm.stream.stall_events_dropped.
	MaxStallEvents int `mapstructure:"max_stall_events"`
	// DropChunkEvents removes the chunk events after derivation: they
	// dominate the storage of streaming spans in trace backends.
	DropChunkEvents bool `mapstructure:"drop_chunk_events"`
	// ErrorMode says how errors of OTTL conditions are handled: ignore (log
	// and go on), propagate (return the error) or silent (go on quietly).
	ErrorMode ottl.ErrorMode `mapstructure:"error_mode"`

	// prevent unkeyed literal initialization
	_ struct{}
}

// ChunkEventsConfig selects the chunk events of a span: the names and
// max_duration shared with stall_metrics and hedge_advisor, and the
// processor's own OTTL conditions.
type ChunkEventsConfig struct {
	figures.ChunkEventsConfig `mapstructure:",squash"`
	// Conditions are OTTL span event conditions, OR-ed among themselves and
	// AND-ed with the name match. They are evaluated only when configured.
	Conditions []string `mapstructure:"conditions"`

	// prevent unkeyed literal initialization
	_ struct{}
}

// Validate checks the configuration, OTTL conditions included, so that
// `otelcol validate` reports every problem before the collector starts.
func (cfg *Config) Validate() error {
	var errs []error
	if cfg.StallThreshold <= 0 {
		errs = append(errs, fmt.Errorf("stall_threshold: must be positive, got %v", cfg.StallThreshold))
	}
	errs = append(errs, cfg.ChunkEvents.Check()...)
	errs = append(errs, cfg.MarkerEvents.Check(cfg.ChunkEvents.Names)...)
	if cfg.MaxStallEvents < 0 {
		errs = append(errs, fmt.Errorf("max_stall_events: must not be negative, got %d", cfg.MaxStallEvents))
	}
	switch cfg.ErrorMode {
	case ottl.IgnoreError, ottl.PropagateError, ottl.SilentError:
	default:
		errs = append(errs, fmt.Errorf("error_mode: unknown error mode %q (want ignore, propagate or silent)", cfg.ErrorMode))
	}
	if _, err := compileConditions(cfg, component.TelemetrySettings{Logger: zap.NewNop()}); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
