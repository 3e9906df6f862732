// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package openaisdk

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/streamstall/streamstall/hedge"
	"github.com/streamstall/streamstall/internal/testbed/fakellm"
)

// TestRetryAfterOfTheSDKSource: the only source answers 429 with a
// Retry-After of 1.5 s. As for the HTTP sources
// (TestIntegrationRetryAfterEndsTheCallWithTheWait), the StatusError
// carries the wait, and the Hedger does not call the source again against
// its answer: hedge/README.md, "no attempt of the call goes to a source
// before its wait is over".
func TestRetryAfterOfTheSDKSource(t *testing.T) {
	srv, err := fakellm.New(fakellm.Config{})
	require.NoError(t, err)
	ts := httptest.NewServer(srv)
	t.Cleanup(func() {
		ts.CloseClientConnections()
		ts.Close()
	})
	b, err := json.Marshal(fakellm.Script{Status: 429, RetryAfterMillis: 1500})
	require.NoError(t, err)
	client := openai.NewClient(option.WithBaseURL(ts.URL+"/v1"), option.WithAPIKey("sk-test"),
		option.WithHeader(fakellm.HeaderScript, string(b)), option.WithMaxRetries(0))
	src := NewSource("limited", client, openai.ChatCompletionNewParams{Model: "sdk-limited"})

	h, err := hedge.New([]hedge.Source{src}, hedge.Delay(time.Hour), hedge.MaxAttempts(3))
	require.NoError(t, err)
	_, err = h.Complete(context.Background(), hello)
	var se *hedge.StatusError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, 429, se.StatusCode)
	assert.Equal(t, 1500*time.Millisecond, se.RetryAfter, "the source's Retry-After is lost")
	time.Sleep(50 * time.Millisecond)
	assert.Len(t, srv.Requests(), 1, "the source that asked to wait is not asked again at once")
}
