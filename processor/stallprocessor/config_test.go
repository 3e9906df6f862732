// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package stallprocessor

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/ottl"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"

	"github.com/streamstall/streamstall/internal/figures"
	"github.com/streamstall/streamstall/internal/testbed/mdcode"
	"github.com/streamstall/streamstall/processor/stallprocessor/internal/metadata"
)

func TestLoadConfig(t *testing.T) {
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)

	tests := []struct {
		id       component.ID
		expected component.Config
		// errorMessages must all appear in the error of an invalid config.
		errorMessages []string
	}{
		{
			id:       component.NewID(metadata.Type),
			expected: createDefaultConfig(),
		},
		{
			id: component.NewIDWithName(metadata.Type, "custom"),
			expected: &Config{
				StallThreshold: 500 * time.Millisecond,
				ChunkEvents: ChunkEventsConfig{
					ChunkEventsConfig: figures.ChunkEventsConfig{Names: []string{"my.chunk"}, MaxDuration: 90 * time.Minute},
					Conditions: []string{
						`attributes["llm.stream.chunk.kind"] != "reasoning"`,
						`span.attributes["gen_ai.provider.name"] == "openai"`,
					},
				},
				Spans: []string{
					`attributes["gen_ai.operation.name"] == "chat"`,
					`resource.attributes["service.name"] == "chat-app"`,
				},
				LoserConditions: []string{
					`attributes["llm.hedge.trigger"] == "stall" and status.code == STATUS_CODE_ERROR`,
					`IsMatch(name, "^hedge-loser")`,
				},
				MarkerEvents: figures.MarkerEventsConfig{
					FirstChunk: []string{"my.first_token"},
					Finish:     []string{"my.done", "my.aborted"},
				},
				InferHedgeOutcome: true,
				MaxStallEvents:    0,
				DropChunkEvents:   true,
				ErrorMode:         ottl.PropagateError,
			},
		},
		{
			id: component.NewIDWithName(metadata.Type, "silent"),
			expected: func() component.Config {
				cfg := createDefaultConfig().(*Config)
				cfg.ErrorMode = ottl.SilentError
				return cfg
			}(),
		},
		{
			id: component.NewIDWithName(metadata.Type, "markers_off"),
			expected: func() component.Config {
				cfg := createDefaultConfig().(*Config)
				cfg.MarkerEvents = figures.MarkerEventsConfig{FirstChunk: []string{}, Finish: []string{}}
				return cfg
			}(),
		},
		{
			id: component.NewIDWithName(metadata.Type, "markers_first_only"),
			expected: func() component.Config {
				cfg := createDefaultConfig().(*Config)
				cfg.MarkerEvents = figures.MarkerEventsConfig{FirstChunk: []string{"my.first_token"}, Finish: []string{}}
				return cfg
			}(),
		},
		{
			id: component.NewIDWithName(metadata.Type, "readme"),
			expected: func() component.Config {
				cfg := createDefaultConfig().(*Config)
				cfg.Spans = []string{`attributes["gen_ai.operation.name"] == "chat" and resource.attributes["service.name"] == "gateway"`}
				cfg.ChunkEvents.Names = []string{"gen_ai.content.completion.chunk"}
				cfg.ChunkEvents.Conditions = []string{`attributes["llm.stream.chunk.kind"] != "reasoning"`}
				cfg.LoserConditions = []string{
					`attributes["llm.hedge.attempt"] != nil and status.code == STATUS_CODE_ERROR and status.message == "context canceled"`,
					`IsMatch(name, "^hedge-loser ")`,
				}
				return cfg
			}(),
		},
		{
			id:            component.NewIDWithName(metadata.Type, "zero_threshold"),
			errorMessages: []string{"stall_threshold: must be positive, got 0s"},
		},
		{
			id:            component.NewIDWithName(metadata.Type, "negative_threshold"),
			errorMessages: []string{"stall_threshold: must be positive, got -1s"},
		},
		{
			id:            component.NewIDWithName(metadata.Type, "no_names"),
			errorMessages: []string{"chunk_events::names: must name at least one chunk event"},
		},
		{
			id:            component.NewIDWithName(metadata.Type, "empty_name"),
			errorMessages: []string{"chunk_events::names[1]: must not be empty"},
		},
		{
			id:            component.NewIDWithName(metadata.Type, "stall_event_as_chunk"),
			errorMessages: []string{`chunk_events::names[0]: "llm.stream.stall" is never a content chunk`},
		},
		{
			id:            component.NewIDWithName(metadata.Type, "keepalive_as_chunk"),
			errorMessages: []string{`chunk_events::names[0]: "llm.stream.keepalive" is never a content chunk`},
		},
		{
			id:            component.NewIDWithName(metadata.Type, "zero_max_duration"),
			errorMessages: []string{"chunk_events::max_duration: must be positive, got 0s"},
		},
		{
			id:            component.NewIDWithName(metadata.Type, "negative_max_stall_events"),
			errorMessages: []string{"max_stall_events: must not be negative, got -1"},
		},
		{
			id:            component.NewIDWithName(metadata.Type, "bad_error_mode"),
			errorMessages: []string{"error_mode", "unknown error mode loud"},
		},
		{
			id:            component.NewIDWithName(metadata.Type, "bad_span_condition"),
			errorMessages: []string{"spans: unable to parse OTTL condition"},
		},
		{
			id:            component.NewIDWithName(metadata.Type, "bad_loser_condition"),
			errorMessages: []string{"loser_conditions: ", "NoSuchFunction"},
		},
		{
			id:            component.NewIDWithName(metadata.Type, "bad_chunk_condition"),
			errorMessages: []string{"chunk_events::conditions: "},
		},
		{
			id:            component.NewIDWithName(metadata.Type, "finish_without_first"),
			errorMessages: []string{"marker_events::finish: needs a first_chunk marker"},
		},
		{
			id:            component.NewIDWithName(metadata.Type, "marker_is_chunk"),
			errorMessages: []string{`marker_events::first_chunk[0]: "gen_ai.content.completion.chunk" is a chunk_events name too`},
		},
		{
			id:            component.NewIDWithName(metadata.Type, "marker_twice"),
			errorMessages: []string{`marker_events::first_chunk[0]: "ai.stream.finish" is a finish marker too`},
		},
		{
			id:            component.NewIDWithName(metadata.Type, "empty_marker"),
			errorMessages: []string{"marker_events::finish[0]: must not be empty"},
		},
		{
			id:            component.NewIDWithName(metadata.Type, "unknown_key"),
			errorMessages: []string{"stall_treshold"},
		},
		{
			id: component.NewIDWithName(metadata.Type, "many_errors"),
			errorMessages: []string{
				"stall_threshold: must be positive",
				"max_stall_events: must not be negative, got -3",
				"chunk_events::names[0]: must not be empty",
			},
		},
	}

	for _, tt := range tests {
		t.Run(tt.id.String(), func(t *testing.T) {
			cfg := createDefaultConfig()
			sub, err := cm.Sub(tt.id.String())
			require.NoError(t, err)
			err = sub.Unmarshal(cfg)

			if tt.expected == nil {
				err = errors.Join(err, confmap.Validate(cfg))
				require.Error(t, err)
				for _, msg := range tt.errorMessages {
					assert.ErrorContains(t, err, msg)
				}
				return
			}
			require.NoError(t, err)
			assert.NoError(t, confmap.Validate(cfg))
			assert.Equal(t, tt.expected, cfg)
		})
	}
}

// An error mode set in code, not through the unmarshaler, is checked too.
func TestValidateErrorModeInCode(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	cfg.ErrorMode = "loud"
	assert.EqualError(t, cfg.Validate(), `error_mode: unknown error mode "loud" (want ignore, propagate or silent)`)
}

// Invalid OTTL also stops the processor from being created, for callers that
// skip validation.
func TestCreateRejectsInvalidOTTL(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	cfg.LoserConditions = []string{`attributes["x"] ==`}
	_, err := newStallProcessor(newTestSettings(t), cfg)
	assert.ErrorContains(t, err, "loser_conditions: ")
}

// TestReadmeConfigurationIsTheDefault: the configuration the README shows
// is the processor's default, key for key: read over the default, it
// changes nothing, and read over an empty configuration, it gives the
// default.
func TestReadmeConfigurationIsTheDefault(t *testing.T) {
	blocks, err := mdcode.File("README.md")
	require.NoError(t, err)
	var yamls []mdcode.Block
	for _, b := range mdcode.In(blocks, "Configuration") {
		if b.Info == "yaml" {
			yamls = append(yamls, b)
		}
	}
	require.NotEmpty(t, yamls)
	r, err := confmap.NewRetrievedFromYAML([]byte(yamls[0].Text))
	require.NoError(t, err)
	cm, err := r.AsConf()
	require.NoError(t, err)
	sub, err := cm.Sub("processors::stall")
	require.NoError(t, err)
	// The README writes an empty list as [], the default leaves it nil.
	emptyAsNil := func(c *Config) *Config {
		for _, l := range []*[]string{&c.ChunkEvents.Conditions, &c.Spans, &c.LoserConditions} {
			if len(*l) == 0 {
				*l = nil
			}
		}
		return c
	}
	over := createDefaultConfig().(*Config)
	require.NoError(t, sub.Unmarshal(over))
	assert.Equal(t, createDefaultConfig(), emptyAsNil(over), "README.md line %d", yamls[0].Line)
	empty := &Config{}
	require.NoError(t, sub.Unmarshal(empty))
	assert.Equal(t, createDefaultConfig(), emptyAsNil(empty), "README.md line %d: every default is shown", yamls[0].Line)
}
