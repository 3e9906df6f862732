// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package fakellm

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const bedrockModel = "anthropic.claude-sonnet-4-20250514-v1:0"

// ownedBody gives net/http a request body of its own. smithy-go closes the body it hands the
// transport as soon as the response headers are in, and net/http may still be reading it (the
// check for bytes past Content-Length): that read then fails, and the transport drops the
// connection, stream and all. A server that answers the moment it has read the body, as fakellm
// does over plain HTTP/1.1, makes that race frequent.
type ownedBody struct{ next http.RoundTripper }

func (o ownedBody) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil && req.Body != http.NoBody {
		b, err := io.ReadAll(req.Body)
		_ = req.Body.Close()
		if err != nil {
			return nil, err
		}
		req = req.Clone(req.Context())
		req.Body = io.NopCloser(bytes.NewReader(b))
	}
	return o.next.RoundTrip(req)
}

// bedrockClient is the official SDK pointed at fakellm, signing with static test credentials.
func bedrockClient(t *testing.T, hs *httptest.Server) *bedrockruntime.Client {
	t.Helper()
	hc := testHTTPClient(t)
	hc.Transport = ownedBody{hc.Transport}
	return bedrockruntime.New(bedrockruntime.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(hs.URL),
		HTTPClient:   hc,
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: "AKIDFAKELLM", SecretAccessKey: "fakellm-secret"}, nil
		}),
		RetryMaxAttempts: 1,
	})
}

var bedrockPrompt = []types.Message{{Role: types.ConversationRoleUser, Content: []types.ContentBlock{&types.ContentBlockMemberText{Value: "Why do streams stall?"}}}}

// decodeMessages reads an event stream body with the SDK's decoder.
func decodeMessages(t *testing.T, body []byte) []eventstream.Message {
	t.Helper()
	var out []eventstream.Message
	r := bytes.NewReader(body)
	for r.Len() > 0 {
		m, err := eventstream.NewDecoder().Decode(r, nil)
		require.NoError(t, err)
		out = append(out, m)
	}
	return out
}

func TestBedrockConverseStreamSDK(t *testing.T) {
	for _, profile := range []string{ProfileSteady, ProfileStall, ProfileBurst, ProfileSlowFirst, ProfileReasoning, ProfileToolCall} {
		t.Run(profile, func(t *testing.T) {
			srv, hs := startServer(t, Config{Profile: profile, TimeFactor: fastFactor, Chunks: 12, Seed: 7})
			out, err := bedrockClient(t, hs).ConverseStream(testContext(t), &bedrockruntime.ConverseStreamInput{ModelId: aws.String(bedrockModel), Messages: bedrockPrompt})
			require.NoError(t, err)
			stream := out.GetStream()
			defer func() { _ = stream.Close() }()
			var text, reasoning, input strings.Builder
			var stop types.StopReason
			var meta *types.ConverseStreamMetadataEvent
			for ev := range stream.Events() {
				switch v := ev.(type) {
				case *types.ConverseStreamOutputMemberContentBlockDelta:
					switch d := v.Value.Delta.(type) {
					case *types.ContentBlockDeltaMemberText:
						text.WriteString(d.Value)
					case *types.ContentBlockDeltaMemberReasoningContent:
						if r, ok := d.Value.(*types.ReasoningContentBlockDeltaMemberText); ok {
							reasoning.WriteString(r.Value)
						}
					case *types.ContentBlockDeltaMemberToolUse:
						input.WriteString(aws.ToString(d.Value.Input))
					}
				case *types.ConverseStreamOutputMemberMessageStop:
					stop = v.Value.StopReason
				case *types.ConverseStreamOutputMemberMetadata:
					meta = &v.Value
				}
			}
			require.NoError(t, stream.Err())
			rec := waitOne(t, srv)
			assert.Equal(t, "bedrock.converse", rec.API)
			assert.Equal(t, bedrockModel, rec.Model)
			assert.True(t, rec.Stream)
			assert.Equal(t, rec.Text, text.String())
			switch profile {
			case ProfileReasoning:
				assert.NotEmpty(t, reasoning.String())
			case ProfileToolCall:
				assert.Equal(t, types.StopReasonToolUse, stop)
				assert.True(t, json.Valid([]byte(input.String())), input.String())
				assert.Contains(t, input.String(), `"query"`)
			default:
				assert.Equal(t, types.StopReasonEndTurn, stop)
			}
			require.NotNil(t, meta)
			assert.Equal(t, int32(12), aws.ToInt32(meta.Usage.OutputTokens))
			assert.Equal(t, rec.Plan.BedrockLatencyMs(), aws.ToInt64(meta.Metrics.LatencyMs))
			assert.Len(t, rec.ChunkTimes, 12)
			assert.Zero(t, rec.Keepalives(), "an event stream has no keepalive")
			assert.Len(t, decodeMessages(t, srv.Sent(0)), rec.Frames, "every message written and flushed on its own")
			assert.True(t, rec.Completed)
		})
	}
}

func TestBedrockInvokeStreamSDK(t *testing.T) {
	for _, profile := range []string{ProfileSteady, ProfileStall, ProfileToolCall} {
		t.Run(profile, func(t *testing.T) {
			srv, hs := startServer(t, Config{Profile: profile, TimeFactor: fastFactor, Chunks: 12, Seed: 7})
			arn := "arn:aws:bedrock:us-east-1:123456789012:inference-profile/us." + bedrockModel
			out, err := bedrockClient(t, hs).InvokeModelWithResponseStream(testContext(t), &bedrockruntime.InvokeModelWithResponseStreamInput{
				ModelId: aws.String(arn), ContentType: aws.String("application/json"),
				Body: []byte(`{"anthropic_version":"bedrock-2023-05-31","max_tokens":256,"messages":[{"role":"user","content":"Why do streams stall?"}]}`),
			})
			require.NoError(t, err)
			stream := out.GetStream()
			defer func() { _ = stream.Close() }()
			var events []string
			for ev := range stream.Events() {
				c, ok := ev.(*types.ResponseStreamMemberChunk)
				require.True(t, ok, "%T", ev)
				events = append(events, string(c.Value.Bytes))
			}
			require.NoError(t, stream.Err())
			rec := waitOne(t, srv)
			assert.Equal(t, "bedrock.invoke", rec.API)
			assert.Equal(t, arn, rec.Model, "the ARN, percent-encoded by the SDK, read back whole")
			assert.True(t, strings.HasPrefix(events[0], `{"type":"message_start"`), events[0])
			assert.Contains(t, events[len(events)-1], `"amazon-bedrock-invocationMetrics"`)
			assert.NotContains(t, strings.Join(events, ""), `"ping"`, "Bedrock passes no pings on")
			assert.Len(t, rec.ChunkTimes, 12)
			assert.Len(t, events, rec.Frames)
			assert.True(t, rec.Completed)
		})
	}
}

// TestBedrockErrorsSDK: an error status is Bedrock's JSON error, which the SDK raises as its
// typed exception.
func TestBedrockErrorsSDK(t *testing.T) {
	_, hs := startServer(t, Config{Profile: ProfileHTTP429, TimeFactor: fastFactor})
	_, err := bedrockClient(t, hs).ConverseStream(testContext(t), &bedrockruntime.ConverseStreamInput{ModelId: aws.String(bedrockModel), Messages: bedrockPrompt})
	var throttled *types.ThrottlingException
	require.ErrorAs(t, err, &throttled)
}
