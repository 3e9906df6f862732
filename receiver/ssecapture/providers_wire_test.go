// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package ssecapture

import (
	"bytes"
	"context"
	"encoding/base64"
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/streamstall/streamstall/internal/semconv"
)

// TestProxyReadsGptOssOnBedrock: OpenAI's gpt-oss models on Bedrock stream
// OpenAI chat.completion.chunk objects inside InvokeModelWithResponseStream's
// chunk events (AWS Bedrock user guide, "OpenAI models": the request and
// response bodies are OpenAI's Chat Completions objects, through InvokeModel
// and InvokeModelWithResponseStream alike). The stream below sends its first
// token 50 ms after the headers and one every 100 ms after: a healthy
// stream, whose chunks the span counts, and which a guard with a 400 ms
// ttft_timeout lets through to aws-sdk-go-v2's own reader (a stream read as
// having no content would be given up at the deadline).
func TestProxyReadsGptOssOnBedrock(t *testing.T) {
	t.Run("unguarded span", func(t *testing.T) { gptOssOnBedrock(t, false) })
	t.Run("guarded", func(t *testing.T) { gptOssOnBedrock(t, true) })
}

func gptOssOnBedrock(t *testing.T, guard bool) {
	var frames [][]byte
	enc := eventstream.NewEncoder()
	chunk := func(native string) {
		var b bytes.Buffer
		var h eventstream.Headers
		h.Set(":message-type", eventstream.StringValue("event"))
		h.Set(":event-type", eventstream.StringValue("chunk"))
		h.Set(":content-type", eventstream.StringValue("application/json"))
		payload := `{"bytes":"` + base64.StdEncoding.EncodeToString([]byte(native)) + `","p":"abcdefgh"}`
		require.NoError(t, enc.Encode(&b, eventstream.Message{Headers: h, Payload: []byte(payload)}))
		frames = append(frames, b.Bytes())
	}
	const head = `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1754400000,"model":"openai.gpt-oss-120b-1:0","choices":[{"index":0,`
	chunk(head + `"delta":{"role":"assistant","content":""},"finish_reason":null}]}`)
	for _, w := range []string{"Hello", " from", " gpt", "-oss", " on", " Bedrock", "!", " Bye", "."} {
		chunk(head + `"delta":{"content":"` + w + `"},"finish_reason":null}]}`)
	}
	chunk(head + `"delta":{},"finish_reason":"stop"}],"amazon-bedrock-invocationMetrics":{"inputTokenCount":12,"outputTokenCount":9,"invocationLatency":1000,"firstByteLatency":50}}`)

	upstream := newTestServer(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/vnd.amazon.eventstream")
		w.Header().Set("X-Amzn-Bedrock-Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		for i, fr := range frames {
			if i > 0 {
				time.Sleep(100 * time.Millisecond)
			} else {
				time.Sleep(50 * time.Millisecond)
			}
			if _, err := w.Write(fr); err != nil {
				return
			}
			w.(http.Flusher).Flush()
		}
	}))
	f := newFixture(t, nil, withProxy(func(p *ProxyConfig) {
		p.Upstream.Endpoint = upstream
		if !guard {
			return
		}
		g := p.Guard.GetOrInsertDefault()
		g.TTFTTimeout = 400 * time.Millisecond
		g.Hedge.MaxAttempts = 1
	}))
	hc := testClient(t)
	hc.Transport = ownedBodyTransport{hc.Transport}
	client := bedrockruntime.New(bedrockruntime.Options{
		Region: "us-west-2", BaseEndpoint: aws.String(f.proxyURL), HTTPClient: hc, RetryMaxAttempts: 1,
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: "AKIDCLIENT", SecretAccessKey: "client-secret"}, nil
		}),
	})
	out, err := client.InvokeModelWithResponseStream(testContext(t), &bedrockruntime.InvokeModelWithResponseStreamInput{
		ModelId: aws.String("openai.gpt-oss-120b-1:0"), ContentType: aws.String("application/json"),
		Body: []byte(`{"messages":[{"role":"user","content":"hi"}],"max_completion_tokens":64}`),
	})
	require.NoError(t, err, "a stream with a token every 100 ms is not late: the guard must not end it")
	stream := out.GetStream()
	got := 0
	for ev := range stream.Events() {
		if _, ok := ev.(*types.ResponseStreamMemberChunk); ok {
			got++
		}
	}
	streamErr := stream.Err()
	_ = stream.Close()
	assert.NoError(t, streamErr, "a stream with a token every 100 ms is not late: the guard must not end it")
	assert.Equal(t, len(frames), got, "the client gets every chunk")

	span := f.spans(t, 1)[0]
	attrs := span.Attributes().AsRaw()
	assert.NotContains(t, attrs, semconv.AttrErrorType)
	assert.Equal(t, 9, eventCount(span, semconv.EventChunk), "one chunk event per content delta")
	assert.Equal(t, []any{"stop"}, attrs[semconv.AttrResponseFinishReasons])
}

// TestProxyCountsAResponsesShellCall: a Responses API answer that is one
// shell tool call streams the command as response.shell_call_command.delta
// events (openai-go v3 responses.ResponseStreamEventUnion,
// ResponseShellCallCommandDeltaEvent.Delta: "The shell command delta that
// was appended"): the model's output, as function_call_arguments.delta is.
// Sent over 900 ms after a 50 ms first delta, under a guard with a 400 ms
// ttft_timeout, it goes through (read as no content, it would get a 504),
// and the span counts its deltas.
func TestProxyCountsAResponsesShellCall(t *testing.T) {
	events := []string{
		"event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"resp_1\",\"object\":\"response\",\"status\":\"in_progress\",\"model\":\"gpt-5.1-2025-11-13\",\"output\":[]}}\n\n",
		"event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"sequence_number\":1,\"output_index\":0,\"item\":{\"type\":\"shell_call\",\"id\":\"sh_1\",\"call_id\":\"call_1\",\"status\":\"in_progress\",\"action\":{\"commands\":[]}}}\n\n",
	}
	for i, d := range []string{"ls", " -la", " /tmp", " &&", " du", " -sh", " ."} {
		events = append(events, "event: response.shell_call_command.delta\ndata: {\"type\":\"response.shell_call_command.delta\",\"sequence_number\":"+
			string(rune('2'+i))+",\"output_index\":0,\"command_index\":0,\"delta\":\""+d+"\",\"obfuscation\":\"x\"}\n\n")
	}
	events = append(events, "event: response.completed\ndata: {\"type\":\"response.completed\",\"sequence_number\":20,\"response\":{\"id\":\"resp_1\",\"object\":\"response\",\"status\":\"completed\",\"model\":\"gpt-5.1-2025-11-13\",\"usage\":{\"input_tokens\":20,\"output_tokens\":12,\"total_tokens\":32}}}\n\n")

	for _, guard := range []bool{false, true} {
		upstream := newTestServer(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			for i, ev := range events {
				if i >= 2 {
					time.Sleep(130 * time.Millisecond)
				}
				if _, err := w.Write([]byte(ev)); err != nil {
					return
				}
				w.(http.Flusher).Flush()
			}
		}))
		f := newFixture(t, nil, withProxy(func(p *ProxyConfig) {
			p.Upstream.Endpoint = upstream
			if guard {
				g := p.Guard.GetOrInsertDefault()
				g.TTFTTimeout = 400 * time.Millisecond
				g.Hedge.MaxAttempts = 1
			}
		}))
		resp, _ := post(t, testClient(t), f.proxyURL+"/v1/responses", `{"model":"gpt-5.1","stream":true,"input":"clean tmp","tools":[{"type":"shell"}]}`, nil)
		assert.Equal(t, http.StatusOK, resp.StatusCode, "guard=%v: a tool call streaming every 130 ms is not late", guard)
		span := f.spans(t, 1)[0]
		assert.Equal(t, 7, eventCount(span, semconv.EventChunk), "guard=%v: one chunk per command delta", guard)
	}
}
