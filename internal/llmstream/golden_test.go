// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package llmstream

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/streamstall/streamstall/internal/sse"
)

var update = flag.Bool("update", false, "rewrite the golden classifications in testdata/streams")

// goldenFrame is one classified frame as the golden files hold it.
type goldenFrame struct {
	End       int64  `json:"end"`
	Kind      string `json:"kind"`
	ChunkKind string `json:"chunk_kind,omitempty"`
	Delta     string `json:"delta,omitempty"`
}

type goldenStream struct {
	Frames []goldenFrame `json:"frames"`
	Meta   Meta          `json:"meta"`
}

// streamFile says which shape and framing a stream file of testdata/streams holds.
func streamFile(name string) (Shape, sse.Framing) {
	shape := ShapeGemini
	switch {
	case strings.HasPrefix(name, "ollama_chat"):
		shape = ShapeOllamaChat
	case strings.HasPrefix(name, "ollama_generate"):
		shape = ShapeOllamaGenerate
	case strings.HasPrefix(name, "bedrock_converse"):
		shape = ShapeBedrockConverse
	case strings.HasPrefix(name, "bedrock_invoke"):
		shape = ShapeBedrockInvoke
	}
	switch filepath.Ext(name) {
	case ".eventstream":
		return shape, sse.FramingEventStream
	case ".ndjson":
		return shape, sse.FramingNDJSON
	case ".json":
		return shape, sse.FramingJSONArray
	}
	return shape, sse.FramingSSE
}

// classifyStream frames a whole body and classifies its frames, feeding it
// in pieces of step bytes.
func classifyStream(t *testing.T, shape Shape, framing sse.Framing, body []byte, step int) goldenStream {
	t.Helper()
	var out goldenStream
	sp := sse.NewSplitter(framing, 0, func(ev *sse.Event) {
		f, err := Classify(shape, ev)
		require.NoError(t, err, "frame %q", ev.Data)
		out.Meta.Merge(&f.Meta)
		out.Frames = append(out.Frames, goldenFrame{End: ev.End, Kind: f.Kind.String(), ChunkKind: f.ChunkKind, Delta: f.Delta})
	})
	for i := 0; i < len(body); i += step {
		sp.Feed(body[i:min(i+step, len(body))])
	}
	sp.Flush()
	return out
}

// TestGoldenStreams classifies the frames of the streams in testdata/streams
// (Gemini as Google AI Studio and Vertex AI send it, with and without
// alt=sse; Ollama's native chat and generate; text, reasoning, tool calls,
// errors, keepalives) against their golden classification, whatever the
// reads' sizes.
func TestGoldenStreams(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "streams", "*"))
	require.NoError(t, err)
	var n int
	for _, file := range files {
		if strings.HasSuffix(file, ".golden.json") {
			continue
		}
		n++
		name := filepath.Base(file)
		t.Run(name, func(t *testing.T) {
			body, err := os.ReadFile(file)
			require.NoError(t, err)
			shape, framing := streamFile(name)
			got := classifyStream(t, shape, framing, body, len(body))
			for _, step := range []int{1, 7} {
				require.Equal(t, got, classifyStream(t, shape, framing, body, step), "fed %d bytes at a time", step)
			}
			golden := strings.TrimSuffix(file, filepath.Ext(file)) + ".golden.json"
			if *update {
				b, err := json.MarshalIndent(got, "", "  ")
				require.NoError(t, err)
				require.NoError(t, os.WriteFile(golden, append(b, '\n'), 0o644))
			}
			b, err := os.ReadFile(golden)
			require.NoError(t, err, "run with -update to create it")
			var want goldenStream
			require.NoError(t, json.Unmarshal(b, &want))
			assert.Equal(t, want, got)

			// The array read whole, as a proxy that could not stream it
			// would, says what its elements said.
			if framing == sse.FramingJSONArray {
				m, err := ParseResponse(shape, body)
				require.NoError(t, err)
				assert.Equal(t, want.Meta, m)
			}
		})
	}
	assert.GreaterOrEqual(t, n, 10, "the recorded streams are there")
}
