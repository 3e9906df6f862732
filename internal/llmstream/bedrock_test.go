// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package llmstream

import (
	"bytes"
	"context"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"
	"github.com/aws/smithy-go/auth/bearer"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/streamstall/streamstall/internal/semconv"
	"github.com/streamstall/streamstall/internal/sse"
)

// esMessage is one message of a recorded Bedrock stream.
type esMessage struct {
	messageType string // event or exception
	typ         string // its :event-type or :exception-type
	payload     string
}

func event(typ, payload string) esMessage { return esMessage{"event", typ, payload} }

// chunk wraps a model's own event as InvokeModelWithResponseStream sends it:
// base64 in a chunk event, with Bedrock's padding field.
func chunk(native string) esMessage {
	return event("chunk", `{"bytes":"`+base64.StdEncoding.EncodeToString([]byte(native))+`","p":"abcdefghijklmnopqrstuvwxyzABCDEFGHIJ"}`)
}

// encodeStream frames the messages with the SDK's own event stream encoder,
// with the headers Bedrock sends.
func encodeStream(tb testing.TB, msgs []esMessage) []byte {
	tb.Helper()
	var b bytes.Buffer
	enc := eventstream.NewEncoder()
	for _, m := range msgs {
		var h eventstream.Headers
		h.Set(":message-type", eventstream.StringValue(m.messageType))
		if m.messageType == "exception" {
			h.Set(":exception-type", eventstream.StringValue(m.typ))
		} else {
			h.Set(":event-type", eventstream.StringValue(m.typ))
		}
		h.Set(":content-type", eventstream.StringValue("application/json"))
		require.NoError(tb, enc.Encode(&b, eventstream.Message{Headers: h, Payload: []byte(m.payload)}))
	}
	return b.Bytes()
}

// bedrockStreams are the recorded Bedrock streams of testdata/streams, in
// the shapes Bedrock documents: ConverseStream's events and
// InvokeModelWithResponseStream's chunks of Anthropic, Meta Llama and
// Amazon Nova events.
var bedrockStreams = map[string][]esMessage{
	"bedrock_converse_text.eventstream": {
		event("messageStart", `{"p":"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVW","role":"assistant"}`),
		event("contentBlockDelta", `{"contentBlockIndex":0,"delta":{"text":"Hello"},"p":"abcdefghijklm"}`),
		event("contentBlockDelta", `{"contentBlockIndex":0,"delta":{"text":" there"},"p":"abcdefghijklmnopq"}`),
		event("contentBlockDelta", `{"contentBlockIndex":0,"delta":{"text":"!"},"p":"abcd"}`),
		event("contentBlockStop", `{"contentBlockIndex":0,"p":"abcdefghijklmnopqrstuvwxyzABCDEF"}`),
		event("messageStop", `{"p":"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ","stopReason":"end_turn"}`),
		event("metadata", `{"metrics":{"latencyMs":412},"p":"abcdefghijkl","usage":{"cacheReadInputTokens":4,"inputTokens":12,"outputTokens":3,"totalTokens":19}}`),
	},
	"bedrock_converse_reasoning_tool.eventstream": {
		event("messageStart", `{"p":"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOP","role":"assistant"}`),
		event("contentBlockDelta", `{"contentBlockIndex":0,"delta":{"reasoningContent":{"text":"The user wants"}},"p":"abcdefgh"}`),
		event("contentBlockDelta", `{"contentBlockIndex":0,"delta":{"reasoningContent":{"text":" the weather."}},"p":"abc"}`),
		event("contentBlockDelta", `{"contentBlockIndex":0,"delta":{"reasoningContent":{"signature":"EqoBCkgIARABGAIiQL"}},"p":"abcdefghijklmnopqrstuvwxyz"}`),
		event("contentBlockStop", `{"contentBlockIndex":0,"p":"abcdefghijklmnopqrstuvwxyzABCDEFGH"}`),
		event("contentBlockStart", `{"contentBlockIndex":1,"p":"abcdefghijklmn","start":{"toolUse":{"name":"get_weather","toolUseId":"tooluse_kZJMlvQmRJ6eAyJE5GIl7Q"}}}`),
		event("contentBlockDelta", `{"contentBlockIndex":1,"delta":{"toolUse":{"input":"{\"city\":"}},"p":"abcdefghijklmnopqrstu"}`),
		event("contentBlockDelta", `{"contentBlockIndex":1,"delta":{"toolUse":{"input":"\"Paris\"}"}},"p":"abcdefghijklm"}`),
		event("contentBlockStop", `{"contentBlockIndex":1,"p":"abcdefghijklmnopqrstuvwxyzABCDEFGH"}`),
		event("messageStop", `{"p":"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0","stopReason":"tool_use"}`),
		event("metadata", `{"metrics":{"latencyMs":1830},"p":"abcdefghijk","usage":{"inputTokens":402,"outputTokens":61,"totalTokens":463}}`),
	},
	"bedrock_converse_throttled.eventstream": {
		event("messageStart", `{"p":"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOP","role":"assistant"}`),
		event("contentBlockDelta", `{"contentBlockIndex":0,"delta":{"text":"Hel"},"p":"abcdefghijklm"}`),
		{"exception", "throttlingException", `{"message":"Too many tokens, please wait before trying again."}`},
	},
	"bedrock_invoke_claude.eventstream": {
		chunk(`{"type":"message_start","message":{"id":"msg_bdrk_01VjKnTHJDaXJ6ypAUZr8dQq","type":"message","role":"assistant","model":"claude-sonnet-4-20250514","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":14,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":1}}}`),
		chunk(`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`),
		chunk(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}}`),
		chunk(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":" there"}}`),
		chunk(`{"type":"content_block_stop","index":0}`),
		chunk(`{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":4}}`),
		chunk(`{"type":"message_stop","amazon-bedrock-invocationMetrics":{"inputTokenCount":14,"outputTokenCount":4,"invocationLatency":695,"firstByteLatency":402}}`),
	},
	"bedrock_invoke_llama.eventstream": {
		chunk(`{"generation":"Hello","prompt_token_count":18,"generation_token_count":1,"stop_reason":null}`),
		chunk(`{"generation":" there","prompt_token_count":null,"generation_token_count":2,"stop_reason":null}`),
		chunk(`{"generation":"","prompt_token_count":null,"generation_token_count":3,"stop_reason":"stop","amazon-bedrock-invocationMetrics":{"inputTokenCount":18,"outputTokenCount":3,"invocationLatency":301,"firstByteLatency":190}}`),
	},
	"bedrock_invoke_nova.eventstream": {
		chunk(`{"messageStart":{"role":"assistant"}}`),
		chunk(`{"contentBlockDelta":{"delta":{"text":"Hello"},"contentBlockIndex":0}}`),
		chunk(`{"contentBlockStop":{"contentBlockIndex":0}}`),
		chunk(`{"messageStop":{"stopReason":"end_turn"}}`),
		chunk(`{"metadata":{"usage":{"inputTokens":7,"outputTokens":1}},"amazon-bedrock-invocationMetrics":{"inputTokenCount":7,"outputTokenCount":1,"invocationLatency":120,"firstByteLatency":88}}`),
	},
}

// TestBedrockStreamFilesAreTheSDKEncoding: the recorded Bedrock streams are
// byte for byte what aws-sdk-go-v2's event stream encoder frames (run with
// -update to write them).
func TestBedrockStreamFilesAreTheSDKEncoding(t *testing.T) {
	for name, msgs := range bedrockStreams {
		file := filepath.Join("testdata", "streams", name)
		want := encodeStream(t, msgs)
		if *update {
			require.NoError(t, os.WriteFile(file, want, 0o644))
		}
		got, err := os.ReadFile(file)
		require.NoError(t, err, "run with -update to create it")
		assert.Equal(t, want, got, name)
	}
}

// bedrockClient is the official SDK's client of srv, with a Bedrock API key
// (the SDK sends bearer keys over HTTPS only).
func bedrockClient(srv *httptest.Server) *bedrockruntime.Client {
	return bedrockruntime.New(bedrockruntime.Options{
		Region:                  "us-east-1",
		BaseEndpoint:            aws.String(srv.URL),
		HTTPClient:              srv.Client(),
		BearerAuthTokenProvider: bearer.StaticTokenProvider{Token: bearer.Token{Value: "bedrock-api-key-test"}},
		AuthSchemePreference:    []string{"httpBearerAuth"},
	})
}

// serveStream answers every request with body as an event stream, and
// records the request paths.
func serveStream(t *testing.T, body []byte, paths *[]string) *httptest.Server {
	t.Helper()
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if paths != nil {
			*paths = append(*paths, r.URL.Path, r.URL.EscapedPath())
		}
		w.Header().Set("Content-Type", "application/vnd.amazon.eventstream")
		_, _ = w.Write(body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

var userMessage = []types.Message{{Role: types.ConversationRoleUser, Content: []types.ContentBlock{&types.ContentBlockMemberText{Value: "Hi"}}}}

// converseStream runs the SDK's ConverseStream against srv and returns the
// text, reasoning and tool input it read, and the stream's error.
func converseStream(t *testing.T, srv *httptest.Server, model string) (map[string]string, error) {
	t.Helper()
	out, err := bedrockClient(srv).ConverseStream(context.Background(), &bedrockruntime.ConverseStreamInput{ModelId: aws.String(model), Messages: userMessage})
	require.NoError(t, err)
	stream := out.GetStream()
	defer func() { _ = stream.Close() }()
	got := map[string]string{}
	for ev := range stream.Events() {
		d, ok := ev.(*types.ConverseStreamOutputMemberContentBlockDelta)
		if !ok {
			continue
		}
		switch v := d.Value.Delta.(type) {
		case *types.ContentBlockDeltaMemberText:
			got[semconv.ChunkKindText] += v.Value
		case *types.ContentBlockDeltaMemberToolUse:
			got[semconv.ChunkKindToolCall] += aws.ToString(v.Value.Input)
		case *types.ContentBlockDeltaMemberReasoningContent:
			if r, ok := v.Value.(*types.ReasoningContentBlockDeltaMemberText); ok {
				got[semconv.ChunkKindReasoning] += r.Value
			}
		}
	}
	return got, stream.Err()
}

// invokeStream runs the SDK's InvokeModelWithResponseStream against srv and
// returns the model events it read, and the stream's error.
func invokeStream(t *testing.T, srv *httptest.Server, model string) ([]string, error) {
	t.Helper()
	out, err := bedrockClient(srv).InvokeModelWithResponseStream(context.Background(), &bedrockruntime.InvokeModelWithResponseStreamInput{
		ModelId: aws.String(model), ContentType: aws.String("application/json"),
		Body: []byte(`{"anthropic_version":"bedrock-2023-05-31","max_tokens":64,"messages":[{"role":"user","content":"Hi"}]}`),
	})
	require.NoError(t, err)
	stream := out.GetStream()
	defer func() { _ = stream.Close() }()
	var got []string
	for ev := range stream.Events() {
		if c, ok := ev.(*types.ResponseStreamMemberChunk); ok {
			got = append(got, string(c.Value.Bytes))
		}
	}
	return got, stream.Err()
}

// deltas joins the deltas of the content frames of a stream, by chunk kind.
func deltas(t *testing.T, shape Shape, body []byte) map[string]string {
	t.Helper()
	got := map[string]string{}
	sp := sse.NewSplitter(sse.FramingEventStream, 0, func(ev *sse.Event) {
		f, err := Classify(shape, ev)
		require.NoError(t, err)
		if f.Kind == KindContent {
			got[f.ChunkKind] += f.Delta
		}
	})
	sp.Feed(body)
	return got
}

// TestBedrockStreamsAsTheSDKReadsThem: the official SDK reads the recorded
// streams, and Classify's chunks carry what it delivers: the same text,
// reasoning and tool input for ConverseStream, the same model events for
// InvokeModelWithResponseStream; the throttled stream is the SDK's typed
// error and Classify's error.type.
func TestBedrockStreamsAsTheSDKReadsThem(t *testing.T) {
	for name, msgs := range bedrockStreams {
		t.Run(name, func(t *testing.T) {
			body := encodeStream(t, msgs)
			srv := serveStream(t, body, nil)
			if strings.HasPrefix(name, "bedrock_invoke") {
				got, err := invokeStream(t, srv, "anthropic.claude-sonnet-4-20250514-v1:0")
				require.NoError(t, err)
				var want []string
				for _, m := range msgs {
					var c invokeChunk
					require.NoError(t, decode([]byte(m.payload), &c))
					want = append(want, string(c.Bytes))
				}
				assert.Equal(t, want, got)
				assert.NotEmpty(t, deltas(t, ShapeBedrockInvoke, body)[semconv.ChunkKindText])
				return
			}
			got, err := converseStream(t, srv, "anthropic.claude-sonnet-4-20250514-v1:0")
			if strings.Contains(name, "throttled") {
				var throttled *types.ThrottlingException
				require.ErrorAs(t, err, &throttled)
				var f Frame
				sp := sse.NewSplitter(sse.FramingEventStream, 0, func(ev *sse.Event) { f, _ = Classify(ShapeBedrockConverse, ev) })
				sp.Feed(body)
				assert.Equal(t, KindError, f.Kind)
				assert.Equal(t, "throttlingException", f.Meta.ErrorType)
			} else {
				require.NoError(t, err)
			}
			assert.Equal(t, got, deltas(t, ShapeBedrockConverse, body))
		})
	}
}

// TestBedrockErrorFrameIsTheSDKTypedError: the frame a proxy ends a Bedrock
// stream with, after some content, is raised by the SDK's stream reader as
// its typed error, on both operations: ModelStreamErrorException with the
// status and code for a stall or a late first token,
// ServiceUnavailableException for a shutdown; and Classify reads it back
// as the error it is.
func TestBedrockErrorFrameIsTheSDKTypedError(t *testing.T) {
	converse := encodeStream(t, bedrockStreams["bedrock_converse_text.eventstream"][:3])
	invoke := encodeStream(t, bedrockStreams["bedrock_invoke_claude.eventstream"][:3])

	stall := BedrockErrorFrame(http.StatusGatewayTimeout, "stall_timeout", "the stream stalled")
	got, err := converseStream(t, serveStream(t, append(append([]byte{}, converse...), stall...), nil), "m")
	assert.Equal(t, map[string]string{semconv.ChunkKindText: "Hello there"}, got)
	var streamErr *types.ModelStreamErrorException
	require.ErrorAs(t, err, &streamErr)
	assert.Equal(t, "the stream stalled", aws.ToString(streamErr.Message))
	assert.Equal(t, int32(http.StatusGatewayTimeout), aws.ToInt32(streamErr.OriginalStatusCode))
	assert.Equal(t, "stall_timeout", aws.ToString(streamErr.OriginalMessage))

	events, err := invokeStream(t, serveStream(t, append(append([]byte{}, invoke...), stall...), nil), "m")
	assert.Len(t, events, 3)
	require.ErrorAs(t, err, &streamErr)

	shutdown := BedrockErrorFrame(http.StatusServiceUnavailable, "shutdown", "the collector is shutting down")
	var unavailable *types.ServiceUnavailableException
	_, err = converseStream(t, serveStream(t, append(append([]byte{}, converse...), shutdown...), nil), "m")
	require.ErrorAs(t, err, &unavailable)
	_, err = invokeStream(t, serveStream(t, shutdown, nil), "m")
	require.ErrorAs(t, err, &unavailable)
	assert.NotErrorAs(t, err, &streamErr)

	for frame, typ := range map[string]string{string(stall): "modelStreamErrorException", string(shutdown): "serviceUnavailableException"} {
		for _, shape := range []Shape{ShapeBedrockConverse, ShapeBedrockInvoke} {
			var f Frame
			sp := sse.NewSplitter(sse.FramingEventStream, 0, func(ev *sse.Event) { f, _ = Classify(shape, ev) })
			sp.Feed([]byte(frame))
			assert.Equal(t, KindError, f.Kind)
			assert.Equal(t, typ, f.Meta.ErrorType)
		}
	}
}

// TestParseEndpointBedrockSDKPaths: the paths the SDK sends for both
// operations, with a model id and with an inference profile ARN
// (percent-encoded, its slash too), name the shape, the provider and the
// model, read as the proxy reads them (decoded) and as sent.
func TestParseEndpointBedrockSDKPaths(t *testing.T) {
	models := []string{
		"anthropic.claude-sonnet-4-20250514-v1:0",
		"arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic.claude-sonnet-4-20250514-v1:0",
	}
	for _, model := range models {
		var paths []string
		srv := serveStream(t, encodeStream(t, bedrockStreams["bedrock_converse_text.eventstream"]), &paths)
		_, err := converseStream(t, srv, model)
		require.NoError(t, err)
		_, err = invokeStream(t, srv, model)
		require.NoError(t, err)
		require.Len(t, paths, 4)
		assert.Contains(t, paths[1], "/converse-stream")
		for i, path := range paths {
			shape := ShapeBedrockConverse
			if i >= 2 {
				shape = ShapeBedrockInvoke
			}
			assert.Equal(t, Endpoint{Shape: shape, Provider: ProviderBedrock, Model: model, Stream: true}, ParseEndpoint(path), path)
		}
	}
	for path, want := range map[string]Endpoint{
		"/model/amazon.nova-pro-v1:0/converse":                  {Shape: ShapeBedrockConverse, Provider: ProviderBedrock, Model: "amazon.nova-pro-v1:0"},
		"/bedrock/model/meta.llama3-8b-instruct-v1:0/invoke":    {Shape: ShapeBedrockInvoke, Provider: ProviderBedrock, Model: "meta.llama3-8b-instruct-v1:0"},
		"/model/m/count-tokens":                                 {Shape: ShapeUnknown},
		"/model//converse-stream":                               {Shape: ShapeUnknown},
		"/model/converse-stream":                                {Shape: ShapeUnknown},
		"/guardrail/g/version/1/apply":                          {Shape: ShapeUnknown},
		"/model/a%zz/converse-stream":                           {Shape: ShapeBedrockConverse, Provider: ProviderBedrock, Model: "a%zz", Stream: true},
		"/v1beta/models/gemini-2.5-flash:streamGenerateContent": {Shape: ShapeGemini, Provider: ProviderGemini, Model: "gemini-2.5-flash", Stream: true},
	} {
		assert.Equal(t, want, ParseEndpoint(path), path)
	}
}

// TestBedrockStreamFraming: an event stream is read as one whatever the
// shape and status, and a Bedrock stream without its media type too.
func TestBedrockStreamFraming(t *testing.T) {
	f, ok := StreamFraming(ShapeBedrockConverse, true, http.StatusOK, "application/vnd.amazon.eventstream")
	assert.True(t, ok)
	assert.Equal(t, sse.FramingEventStream, f)
	f, ok = StreamFraming(ShapeBedrockInvoke, true, http.StatusOK, "")
	assert.True(t, ok)
	assert.Equal(t, sse.FramingEventStream, f)
	_, ok = StreamFraming(ShapeBedrockConverse, true, http.StatusTooManyRequests, "application/json")
	assert.False(t, ok, "an error status is one JSON body")
	_, ok = StreamFraming(ShapeBedrockConverse, false, http.StatusOK, "application/json")
	assert.False(t, ok)
}

// TestParseResponseBedrock reads whole Converse and InvokeModel answers.
func TestParseResponseBedrock(t *testing.T) {
	m, err := ParseResponse(ShapeBedrockConverse, []byte(`{"output":{"message":{"role":"assistant","content":[{"text":"Hi"}]}},"stopReason":"end_turn","usage":{"inputTokens":10,"outputTokens":2,"totalTokens":12,"cacheWriteInputTokens":5},"metrics":{"latencyMs":250}}`))
	require.NoError(t, err)
	assert.Equal(t, Meta{FinishReasons: []string{"end_turn"}, InputTokens: 15, HasInputTokens: true, OutputTokens: 2, HasOutputTokens: true, Server: ServerTimings{Total: 250e6}}, m)

	m, err = ParseResponse(ShapeBedrockInvoke, []byte(`{"id":"msg_bdrk_01","type":"message","role":"assistant","model":"claude-sonnet-4-20250514","content":[{"type":"text","text":"Hi"}],"stop_reason":"end_turn","usage":{"input_tokens":9,"output_tokens":2}}`))
	require.NoError(t, err)
	assert.Equal(t, Meta{ResponseID: "msg_bdrk_01", ResponseModel: "claude-sonnet-4-20250514", FinishReasons: []string{"end_turn"}, InputTokens: 9, HasInputTokens: true, OutputTokens: 2, HasOutputTokens: true}, m)

	m, err = ParseResponse(ShapeBedrockInvoke, []byte(`{"generation":"Hi","prompt_token_count":9,"generation_token_count":2,"stop_reason":"stop"}`))
	require.NoError(t, err)
	assert.Equal(t, []string{"stop"}, m.FinishReasons)

	_, err = ParseResponse(ShapeBedrockConverse, []byte(`{"usage":`))
	require.ErrorIs(t, err, ErrMalformed)
}

// TestClassifyBedrockMalformed: a chunk whose payload or bytes are not JSON
// is a meta frame and ErrMalformed, never a panic.
func TestClassifyBedrockMalformed(t *testing.T) {
	for _, tc := range []struct {
		shape Shape
		ev    sse.Event
	}{
		{ShapeBedrockConverse, sse.Event{MessageType: []byte("event"), Type: []byte("contentBlockDelta"), Data: []byte(`{"delta":`)}},
		{ShapeBedrockInvoke, sse.Event{MessageType: []byte("event"), Type: []byte("chunk"), Data: []byte(`{"bytes":"!!"}`)}},
		{ShapeBedrockInvoke, sse.Event{MessageType: []byte("event"), Type: []byte("chunk"), Data: []byte(`{"bytes":"` + base64.StdEncoding.EncodeToString([]byte("{")) + `"}`)}},
	} {
		f, err := Classify(tc.shape, &tc.ev)
		require.ErrorIs(t, err, ErrMalformed)
		assert.Equal(t, KindMeta, f.Kind)
	}
	f, err := Classify(ShapeBedrockConverse, &sse.Event{MessageType: []byte("exception")})
	require.NoError(t, err)
	assert.Equal(t, Frame{Kind: KindError, Meta: Meta{ErrorType: ErrorTypeUnknown}}, f)
}

// TestBedrockErrorType reads the error type of Bedrock's error responses
// from their header, and only theirs.
func TestBedrockErrorType(t *testing.T) {
	h := http.Header{"X-Amzn-Errortype": {"ThrottlingException:http://internal.amazon.com/coral/com.amazon.bedrock/"}}
	assert.Equal(t, "ThrottlingException", BedrockErrorType(ShapeBedrockConverse, h))
	assert.Equal(t, "ThrottlingException", BedrockErrorType(ShapeBedrockInvoke, h))
	assert.Empty(t, BedrockErrorType(ShapeMessages, h))
	assert.Empty(t, BedrockErrorType(ShapeBedrockConverse, http.Header{}))
}

// TestBoundaryEventStream: the guard's frame follows a whole message only.
// Cut anywhere inside a recorded stream's last message, no frame can close
// it; after it, the frame is the exception the SDK raises.
func TestBoundaryEventStream(t *testing.T) {
	whole := encodeStream(t, bedrockStreams["bedrock_converse_text.eventstream"][:3])
	last := encodeStream(t, bedrockStreams["bedrock_converse_text.eventstream"][:2])
	stall := BedrockErrorFrame(http.StatusGatewayTimeout, "stall_timeout", "m")
	for _, shape := range []Shape{ShapeBedrockConverse, ShapeBedrockInvoke} {
		for cut := len(last); cut <= len(whole); cut++ {
			for split := 0; split <= cut; split += 7 {
				b := NewBoundary(shape, sse.FramingEventStream)
				b.Track(whole[:split])
				b.Track(whole[split:cut])
				frame := b.ErrorFrame(http.StatusGatewayTimeout, "stall_timeout", "m")
				if cut == len(last) || cut == len(whole) {
					assert.Equal(t, stall, frame, "cut %d: after a whole message", cut)
				} else {
					assert.Nil(t, frame, "cut %d: inside a message", cut)
				}
			}
		}
	}
	b := NewBoundary(ShapeBedrockConverse, sse.FramingEventStream)
	b.Track([]byte{0, 0, 0, 3, 9, 9, 9, 9})
	assert.Nil(t, b.ErrorFrame(http.StatusGatewayTimeout, "stall_timeout", "m"), "a length no message has: the framing is lost")
}
