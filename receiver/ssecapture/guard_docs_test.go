// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package ssecapture

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/streamstall/streamstall/internal/llmstream"
	"github.com/streamstall/streamstall/internal/sse"
	"github.com/streamstall/streamstall/internal/testbed/mdcode"
)

// TestReadmeShowsTheGuardsErrorFrames: the error frames and bodies the
// README shows are the ones the guard writes, shape by shape, in order.
func TestReadmeShowsTheGuardsErrorFrames(t *testing.T) {
	const (
		stall = "stream stalled: no content for 30.002s (stall_timeout 30s, sse_capture guard)"
		ttft  = "no content within ttft_timeout (10s) from any of 2 attempts (sse_capture guard)"
	)
	frame := func(shape llmstream.Shape, framing sse.Framing, sent string) string {
		b := llmstream.NewBoundary(shape, framing)
		b.Track([]byte(sent))
		return string(b.ErrorFrame(http.StatusGatewayTimeout, "stall_timeout", stall))
	}
	var bodies strings.Builder
	for _, s := range []llmstream.Shape{llmstream.ShapeChatCompletions, llmstream.ShapeMessages, llmstream.ShapeGemini, llmstream.ShapeOllamaChat} {
		fmt.Fprintf(&bodies, "%s\n", llmstream.ErrorBody(s, http.StatusGatewayTimeout, "ttft_timeout", ttft))
	}
	want := []string{
		frame(llmstream.ShapeChatCompletions, sse.FramingSSE, ""),
		frame(llmstream.ShapeResponses, sse.FramingSSE, `data: {"type":"response.output_text.delta","sequence_number":41}`+"\n\n"),
		frame(llmstream.ShapeMessages, sse.FramingSSE, ""),
		frame(llmstream.ShapeGemini, sse.FramingSSE, ""),
		frame(llmstream.ShapeGemini, sse.FramingJSONArray, `[{"candidates":[]}`),
		frame(llmstream.ShapeOllamaChat, sse.FramingNDJSON, ""),
		bodies.String(),
	}
	blocks, err := mdcode.File("README.md")
	require.NoError(t, err)
	shown := mdcode.In(blocks, "Error frames")
	require.Len(t, shown, len(want))
	for i, b := range shown {
		assert.Equal(t, strings.TrimRight(want[i], "\n"), strings.TrimRight(b.Text, "\n"), "README.md line %d", b.Line)
	}
}
