// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package llmstream

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/streamstall/streamstall/internal/sse"
)

// classifyAll parses an SSE byte string and classifies every event in it.
// A malformed event fails the test unless lenient.
func classifyAll(t *testing.T, shape Shape, b []byte, lenient bool) []Frame {
	t.Helper()
	var frames []Frame
	var p sse.Parser
	p.Handler = func(ev *sse.Event) {
		f, err := Classify(shape, ev)
		if !lenient {
			require.NoError(t, err)
		}
		frames = append(frames, f)
	}
	p.Feed(b)
	require.False(t, p.Pending(), "the frame must be complete: %q", b)
	return frames
}

func TestErrorFrameIsTheShapesErrorFrame(t *testing.T) {
	const msg = `stream stalled: no content for 30s ("quoted")`
	for _, shape := range []Shape{ShapeChatCompletions, ShapeCompletions, ShapeResponses, ShapeMessages} {
		t.Run(shape.String(), func(t *testing.T) {
			frames := classifyAll(t, shape, ErrorFrame(shape, http.StatusGatewayTimeout, "stall_timeout", msg, false), false)
			require.Len(t, frames, 1)
			assert.Equal(t, KindError, frames[0].Kind)
			assert.Equal(t, msg, frames[0].Meta.ErrorMessage)
			assert.NotEmpty(t, frames[0].Meta.ErrorType)
		})
	}
}

func TestErrorFrameWireFormat(t *testing.T) {
	assert.Equal(t,
		`data: {"error":{"message":"m","type":"server_error","param":null,"code":"stall_timeout"}}`+"\n\n",
		string(ErrorFrame(ShapeChatCompletions, http.StatusGatewayTimeout, "stall_timeout", "m", false)))
	assert.Equal(t,
		"event: error\ndata: "+`{"type":"error","code":"stall_timeout","message":"m","param":null,`+
			`"error":{"message":"m","type":"server_error","param":null,"code":"stall_timeout"}}`+"\n\n",
		string(ErrorFrame(ShapeResponses, http.StatusGatewayTimeout, "stall_timeout", "m", false)))
	assert.Equal(t,
		"event: error\ndata: "+`{"type":"error","error":{"type":"timeout_error","message":"m"}}`+"\n\n",
		string(ErrorFrame(ShapeMessages, http.StatusGatewayTimeout, "stall_timeout", "m", false)))
	assert.Contains(t, string(ErrorFrame(ShapeMessages, http.StatusServiceUnavailable, "shutdown", "m", false)), `"overloaded_error"`)
}

// TestErrorFrameAfterAnOpenLine: bytes cut in the middle of a frame are
// closed off, so the error frame is still read as a frame of its own.
func TestErrorFrameAfterAnOpenLine(t *testing.T) {
	for _, shape := range []Shape{ShapeChatCompletions, ShapeMessages} {
		cut := []byte(`data: {"choices":[{"delta":{"content":"x`)
		// The cut frame itself is malformed; the error frame after it is not.
		frames := classifyAll(t, shape, append(cut, ErrorFrame(shape, http.StatusGatewayTimeout, "stall_timeout", "m", true)...), true)
		require.NotEmpty(t, frames)
		assert.Equal(t, KindError, frames[len(frames)-1].Kind, shape.String())
	}
}

func TestErrorBody(t *testing.T) {
	for _, shape := range []Shape{ShapeChatCompletions, ShapeCompletions, ShapeResponses, ShapeMessages, ShapeUnknown} {
		t.Run(shape.String(), func(t *testing.T) {
			body := ErrorBody(shape, http.StatusGatewayTimeout, "ttft_timeout", "no content in 10s")
			require.True(t, json.Valid(body))
			m, err := ParseResponse(shape, body)
			require.NoError(t, err)
			assert.NotEmpty(t, m.ErrorType)
			assert.Equal(t, "no content in 10s", m.ErrorMessage)
		})
	}
	assert.JSONEq(t, `{"type":"error","error":{"type":"timeout_error","message":"m"}}`,
		string(ErrorBody(ShapeMessages, http.StatusGatewayTimeout, "ttft_timeout", "m")))
	assert.JSONEq(t, `{"error":{"message":"m","type":"server_error","param":null,"code":"ttft_timeout"}}`,
		string(ErrorBody(ShapeChatCompletions, http.StatusGatewayTimeout, "ttft_timeout", "m")))
}
