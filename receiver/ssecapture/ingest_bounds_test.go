// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package ssecapture

import (
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"net/http"
	"testing"
	"time"

	"github.com/golang/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer/consumertest"

	"github.com/streamstall/streamstall/receiver/ssecapture/internal/ingest"
)

// TestIngestDocumentedEncodings: ingest decodes the encodings
// docs/ingest.md lists (gzip, zstd, snappy, deflate) and no other that
// confighttp knows: zlib, lz4 and x-snappy-framed bodies are refused
// before they are decoded.
func TestIngestDocumentedEncodings(t *testing.T) {
	sink := new(consumertest.TracesSink)
	url := startIngest(t, sink, nil) + ingest.Path
	record := []byte(okRecord)
	encode := map[string]func() []byte{
		"gzip": func() []byte {
			var b bytes.Buffer
			w := gzip.NewWriter(&b)
			_, _ = w.Write(record)
			require.NoError(t, w.Close())
			return b.Bytes()
		},
		"deflate": func() []byte {
			var b bytes.Buffer
			w := zlib.NewWriter(&b)
			_, _ = w.Write(record)
			require.NoError(t, w.Close())
			return b.Bytes()
		},
		"zstd": func() []byte {
			enc, err := zstd.NewWriter(nil)
			require.NoError(t, err)
			defer func() { _ = enc.Close() }()
			return enc.EncodeAll(record, nil)
		},
		"snappy": func() []byte { return snappy.Encode(nil, record) },
	}
	for coding, body := range encode {
		resp, reply := postIngest(t, url, "application/json", body(), http.Header{"Content-Encoding": {coding}})
		assert.Equal(t, http.StatusOK, resp.StatusCode, "%s: %s", coding, reply.Error)
	}
	assert.Equal(t, len(encode), sink.SpanCount())
	for _, coding := range []string{"zlib", "lz4", "x-snappy-framed"} {
		resp, reply := postIngest(t, url, "application/json", encode["deflate"](), http.Header{"Content-Encoding": {coding}})
		assert.Equal(t, http.StatusBadRequest, resp.StatusCode, coding)
		assert.Contains(t, reply.Error, coding)
	}
	assert.Equal(t, len(encode), sink.SpanCount(), "nothing taken from a refused encoding")
}

// TestIngestWhitespaceBomb: 32 KB of gzip that decodes to 32 MiB of white
// space is refused with 413 once max_request_body decoded bytes are read;
// the decoder reads white space a window at a time, so the refusal costs
// what reading 16 MiB costs (encoding/json's Decoder spent seconds on it).
func TestIngestWhitespaceBomb(t *testing.T) {
	url := startIngest(t, new(consumertest.TracesSink), nil) + ingest.Path
	var gz bytes.Buffer
	w, err := gzip.NewWriterLevel(&gz, gzip.BestCompression)
	require.NoError(t, err)
	_, _ = w.Write(bytes.Repeat([]byte(" "), 32<<20))
	require.NoError(t, w.Close())
	require.Less(t, gz.Len(), 64<<10)
	start := time.Now()
	resp, reply := postIngest(t, url, "application/json", gz.Bytes(), http.Header{"Content-Encoding": {"gzip"}})
	t.Logf("%d bytes of gzip, 32 MiB decoded: %d after %s", gz.Len(), resp.StatusCode, time.Since(start).Round(time.Millisecond))
	assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
	assert.Contains(t, reply.Error, "exceeds")
}
