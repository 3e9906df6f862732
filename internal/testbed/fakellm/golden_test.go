// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package fakellm

import (
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite the golden wire files in testdata/wire")

// TestWireGolden pins the exact bytes of every API, content kind and mode. The files double as
// a reference of the wire formats for the parsers built against fakellm.
func TestWireGolden(t *testing.T) {
	bodies := map[string]string{
		"/v1/chat/completions": `{"model":"gpt-4o","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`,
		"/v1/completions":      `{"model":"gpt-3.5-turbo-instruct","stream":true,"prompt":"Once"}`,
		"/v1/responses":        `{"model":"gpt-4.1","stream":true,"input":"hi"}`,
		"/v1/messages":         `{"model":"claude-sonnet-4-5","max_tokens":256,"stream":true,"messages":[{"role":"user","content":"hi"}]}`,
	}
	names := map[string]string{
		"/v1/chat/completions": "chat", "/v1/completions": "completions", "/v1/responses": "responses", "/v1/messages": "messages",
	}
	for path, body := range bodies {
		contents := []string{ContentText, ContentToolCall, ContentReasoning}
		if path == "/v1/completions" {
			contents = []string{ContentText}
		}
		for _, content := range contents {
			for _, stream := range []bool{true, false} {
				name := names[path] + "_" + content
				reqBody := body
				if !stream {
					name += "_nonstream"
					reqBody = strings.Replace(body, `"stream":true`, `"stream":false`, 1)
				}
				t.Run(name, func(t *testing.T) {
					clock := clockwork.NewFakeClockAt(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
					srv, hs := startServer(t, Config{Seed: 2026, Clock: clock, Profile: `{"ttft_ms":0}`, Chunks: 4})
					resp := postJSON(testContext(t), t, hs.URL+path, reqBody, map[string]string{HeaderContent: content})
					require.Equal(t, http.StatusOK, resp.StatusCode)
					got, err := io.ReadAll(resp.Body)
					require.NoError(t, err)
					rec := waitOne(t, srv)
					if stream {
						assert.Len(t, rec.ChunkTimes, 4)
					}
					file := filepath.Join("testdata", "wire", name+map[bool]string{true: ".sse", false: ".json"}[stream])
					if *update {
						require.NoError(t, os.MkdirAll(filepath.Dir(file), 0o755))
						require.NoError(t, os.WriteFile(file, got, 0o644))
					}
					want, err := os.ReadFile(file)
					require.NoError(t, err, "run with -update to create it")
					assert.Equal(t, string(want), string(got))
				})
			}
		}
	}
}

// TestNativeWireGolden pins the bytes of Gemini (alt=sse, the JSON array, unary) and Ollama's
// native API (streamed and not) for every content kind.
func TestNativeWireGolden(t *testing.T) {
	type call struct{ name, path, body, ext string }
	const geminiBody = `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]%s}`
	geminiExtra := map[string]string{
		ContentText:      "",
		ContentToolCall:  `,"tools":[{"functionDeclarations":[{"name":"get_weather"}]}]`,
		ContentReasoning: `,"generationConfig":{"thinkingConfig":{"includeThoughts":true}}`,
	}
	ollamaExtra := map[string]string{
		ContentText:      "",
		ContentToolCall:  `,"tools":[{"type":"function","function":{"name":"get_weather"}}]`,
		ContentReasoning: `,"think":true`,
	}
	var calls []call
	for _, content := range []string{ContentText, ContentToolCall, ContentReasoning} {
		gb := fmt.Sprintf(geminiBody, geminiExtra[content])
		calls = append(calls,
			call{"gemini_" + content, "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse", gb, ".sse"},
			call{"gemini_" + content + "_array", "/v1/projects/p/locations/us-central1/publishers/google/models/gemini-2.5-flash:streamGenerateContent", gb, ".json"},
			call{"gemini_" + content + "_nonstream", "/v1beta/models/gemini-2.5-flash:generateContent", gb, ".json"},
			call{"ollama_chat_" + content, "/api/chat", `{"model":"llama3.2","messages":[{"role":"user","content":"hi"}]` + ollamaExtra[content] + `}`, ".ndjson"},
			call{"ollama_chat_" + content + "_nonstream", "/api/chat", `{"model":"llama3.2","stream":false,"messages":[{"role":"user","content":"hi"}]` + ollamaExtra[content] + `}`, ".json"},
		)
	}
	calls = append(calls, call{"ollama_generate_text", "/api/generate", `{"model":"llama3.2","prompt":"Once"}`, ".ndjson"})
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			clock := clockwork.NewFakeClockAt(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
			srv, hs := startServer(t, Config{Seed: 2026, Clock: clock, Profile: `{"ttft_ms":0}`, Chunks: 4})
			resp := postJSON(testContext(t), t, hs.URL+c.path, c.body, nil)
			require.Equal(t, http.StatusOK, resp.StatusCode)
			got, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			rec := waitOne(t, srv)
			if !strings.HasSuffix(c.name, "_nonstream") {
				assert.Len(t, rec.ChunkTimes, 4)
			}
			file := filepath.Join("testdata", "wire", c.name+c.ext)
			if *update {
				require.NoError(t, os.WriteFile(file, got, 0o644))
			}
			want, err := os.ReadFile(file)
			require.NoError(t, err, "run with -update to create it")
			assert.Equal(t, string(want), string(got))
		})
	}
}
