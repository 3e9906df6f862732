// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package ssecapture

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/consumer/consumertest"

	"github.com/streamstall/streamstall/receiver/ssecapture/internal/ingest"
)

func startIngest(t *testing.T, next consumer.Traces, tune func(*IngestConfig)) string {
	t.Helper()
	cfg := NewFactory().CreateDefaultConfig().(*Config)
	i := cfg.Ingest.GetOrInsertDefault()
	i.NetAddr.Endpoint = "127.0.0.1:0"
	if tune != nil {
		tune(i)
	}
	require.NoError(t, cfg.Validate())
	rcv := startReceiver(t, cfg, next, newMdatagenNopHost(), nil)
	return "http://" + rcv.addrs["ingest"].String()
}

type ingestReply struct {
	Accepted int    `json:"accepted"`
	Error    string `json:"error"`
	Record   *int   `json:"record"`
	Field    string `json:"field"`
}

func postIngest(t *testing.T, url, contentType string, body []byte, header http.Header) (*http.Response, ingestReply) {
	t.Helper()
	req, err := http.NewRequestWithContext(testContext(t), http.MethodPost, url, bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", contentType)
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := testClient(t).Do(req)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var reply ingestReply
	require.NoError(t, json.Unmarshal(raw, &reply), string(raw))
	assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	return resp, reply
}

// okRecord is a stream that started as the tests did: ingest refuses
// records from more than max_start_age before they arrive.
var okRecord = fmt.Sprintf(`{"name":"chat gpt-4o","start_time_unix_nano":"%d","chunk_offsets_ms":[100,150.5,3200]}`, time.Now().UnixNano())

func TestIngestHTTP(t *testing.T) {
	sink := new(consumertest.TracesSink)
	base := startIngest(t, sink, func(i *IngestConfig) {
		i.MaxRequestBody = 2048
		i.MaxRecords = 3
		i.MaxChunksPerRecord = 4
	})
	url := base + ingest.Path

	resp, reply := postIngest(t, url, "application/json", []byte(okRecord), nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, reply.Error)
	assert.Equal(t, 1, reply.Accepted)
	assert.Equal(t, 1, sink.SpanCount(), "delivered before the response")

	resp, reply = postIngest(t, url, "application/json", []byte("["+okRecord+","+okRecord+"]"), nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, reply.Error)
	assert.Equal(t, 2, reply.Accepted)

	resp, reply = postIngest(t, url, "application/x-ndjson", []byte(okRecord+"\n"+okRecord+"\n"+okRecord+"\n"), nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, reply.Error)
	assert.Equal(t, 3, reply.Accepted)
	assert.Equal(t, 6, sink.SpanCount())

	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write([]byte(okRecord))
	require.NoError(t, zw.Close())
	resp, reply = postIngest(t, url, "application/json", gz.Bytes(), http.Header{"Content-Encoding": {"gzip"}})
	require.Equal(t, http.StatusOK, resp.StatusCode, reply.Error)
	assert.Equal(t, 7, sink.SpanCount())

	// All or nothing: the second record is bad, nothing is taken.
	resp, reply = postIngest(t, url, "application/x-ndjson", []byte(okRecord+"\n"+`{"name":"x","start_time_unix_nano":1,"span_id":"xyz"}`), nil)
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.NotNil(t, reply.Record)
	assert.Equal(t, 1, *reply.Record)
	assert.Equal(t, "span_id", reply.Field)
	assert.Contains(t, reply.Error, "hex digits")
	assert.Equal(t, 7, sink.SpanCount(), "nothing half-ingested")

	resp, reply = postIngest(t, url, "application/json", []byte(strings.Repeat(okRecord+"\n", 4)), nil)
	assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode, "max_records")
	assert.Contains(t, reply.Error, "more than 3 records")

	resp, reply = postIngest(t, url, "application/json", []byte(`{"name":"a","start_time_unix_nano":1,"chunk_offsets_ms":[1,2,3,4,5]}`), nil)
	assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode, "max_chunks_per_record")
	assert.Equal(t, "chunk_offsets_ms", reply.Field)

	resp, reply = postIngest(t, url, "application/json", []byte(`{"name":"`+strings.Repeat("x", 3000)+`"}`), nil)
	assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode, "max_request_body")
	assert.Contains(t, reply.Error, "2048 bytes")
	assert.Nil(t, reply.Record)

	resp, _ = postIngest(t, base+"/v1/other", "application/json", []byte(okRecord), nil)
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)

	req, err := http.NewRequestWithContext(testContext(t), http.MethodGet, url, nil)
	require.NoError(t, err)
	getResp, err := testClient(t).Do(req)
	require.NoError(t, err)
	_ = getResp.Body.Close()
	assert.Equal(t, http.StatusMethodNotAllowed, getResp.StatusCode)
	assert.Equal(t, http.MethodPost, getResp.Header.Get("Allow"))
	assert.Equal(t, 7, sink.SpanCount())
}

func TestIngestPipelineRefuses(t *testing.T) {
	t.Run("transient", func(t *testing.T) {
		url := startIngest(t, consumertest.NewErr(errors.New("queue full")), nil) + ingest.Path
		resp, reply := postIngest(t, url, "application/json", []byte(okRecord), nil)
		assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
		assert.Equal(t, "1", resp.Header.Get("Retry-After"))
		assert.Contains(t, reply.Error, "retry")
	})
	t.Run("permanent", func(t *testing.T) {
		url := startIngest(t, consumertest.NewErr(consumererror.NewPermanent(errors.New("bad data"))), nil) + ingest.Path
		resp, reply := postIngest(t, url, "application/json", []byte(okRecord), nil)
		assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
		assert.Empty(t, resp.Header.Get("Retry-After"))
		assert.Contains(t, reply.Error, "bad data")
	})
}

// TestIngestOnlyJSON (docs/security.md, the ingest listener): only
// JSON content types are taken (a CORS simple request with text/plain is
// not), and every error, including those confighttp raises before the
// handler, has a JSON body.
func TestIngestOnlyJSON(t *testing.T) {
	sink := new(consumertest.TracesSink)
	url := startIngest(t, sink, nil) + ingest.Path

	for _, ct := range []string{"application/json", "application/json; charset=utf-8", "Application/JSON;Charset=UTF-8", "application/x-ndjson", "application/x-ndjson; charset=utf-8"} {
		resp, reply := postIngest(t, url, ct, []byte(okRecord), nil)
		assert.Equal(t, http.StatusOK, resp.StatusCode, ct+": "+reply.Error)
	}
	require.Equal(t, 5, sink.SpanCount())

	for _, ct := range []string{"text/plain", "text/plain;charset=UTF-8", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "application/jsonx", "", "application/json; charset"} {
		resp, reply := postIngest(t, url, ct, []byte(okRecord), http.Header{"Origin": {"https://evil.example"}})
		assert.Equal(t, http.StatusUnsupportedMediaType, resp.StatusCode, ct)
		assert.Contains(t, reply.Error, "application/x-ndjson", ct)
	}

	resp, reply := postIngest(t, url, "application/json", []byte(okRecord), http.Header{"Content-Encoding": {"br"}})
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	assert.Contains(t, reply.Error, "br")

	resp, reply = postIngest(t, url, "application/json", []byte("not gzip"), http.Header{"Content-Encoding": {"gzip"}})
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	assert.NotEmpty(t, reply.Error)

	for _, method := range []string{http.MethodGet, http.MethodPut, http.MethodDelete} {
		req, err := http.NewRequestWithContext(testContext(t), method, url, nil)
		require.NoError(t, err)
		r, err := testClient(t).Do(req)
		require.NoError(t, err)
		raw, err := io.ReadAll(r.Body)
		_ = r.Body.Close()
		require.NoError(t, err)
		assert.Equal(t, http.StatusMethodNotAllowed, r.StatusCode)
		assert.Equal(t, "application/json", r.Header.Get("Content-Type"))
		var body ingestReply
		require.NoError(t, json.Unmarshal(raw, &body), string(raw))
		assert.Contains(t, body.Error, "POST")
	}

	resp, reply = postIngest(t, url, "application/json", []byte(`{"name":"a","start_time_unix_nano":1,"attributes":{"llm.stream.stall_count":3,"llm.stream.stall_ms":90000}}`), nil)
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode, "forged figures")
	assert.Contains(t, reply.Field, "attributes.llm.stream.stall")
	assert.Contains(t, reply.Error, "reserved")

	resp, reply = postIngest(t, url, "application/json", zeroArray(8<<20-1), nil)
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode, "a zeros array")
	require.NotNil(t, reply.Record)
	assert.Equal(t, 0, *reply.Record)
	assert.Equal(t, 5, sink.SpanCount())
}

// TestIngestStopsAtShutdown: shutting the receiver down stops requests
// still decoding; they get 503 with a JSON error and nothing is taken.
func TestIngestStopsAtShutdown(t *testing.T) {
	sink := new(consumertest.TracesSink)
	cfg := NewFactory().CreateDefaultConfig().(*Config)
	i := cfg.Ingest.GetOrInsertDefault()
	i.NetAddr.Endpoint = "127.0.0.1:0"
	rcv := startReceiver(t, cfg, sink, newMdatagenNopHost(), nil)
	require.NotNil(t, rcv.ingest)
	require.NoError(t, rcv.Shutdown(testContext(t)))

	rec := httptest.NewRecorder()
	req := httptest.NewRequestWithContext(testContext(t), http.MethodPost, ingest.Path, strings.NewReader(okRecord))
	req.Header.Set("Content-Type", "application/json")
	rcv.ingest.ServeHTTP(rec, req)
	assert.Equal(t, http.StatusServiceUnavailable, rec.Code)
	assert.Equal(t, "1", rec.Header().Get("Retry-After"))
	var reply ingestReply
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &reply), rec.Body.String())
	assert.Contains(t, reply.Error, "decoding stopped")
	assert.Zero(t, sink.SpanCount())
}

// zeroArray is the JSON array of n zeros.
func zeroArray(n int) []byte {
	b := append([]byte{'['}, bytes.Repeat([]byte("0,"), n)...)
	b[len(b)-1] = ']'
	return b
}

// TestIngestRefusesImplausibleRecords: over HTTP, a record from another day,
// one that lasts too long, and one whose name is not UTF-8 (also inside a
// gzip body) get 400 naming the record and the field; nothing is taken.
func TestIngestRefusesImplausibleRecords(t *testing.T) {
	sink := new(consumertest.TracesSink)
	url := startIngest(t, sink, nil) + ingest.Path
	now := time.Now()
	gzipped := func(b string) []byte {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		_, _ = zw.Write([]byte(b))
		require.NoError(t, zw.Close())
		return buf.Bytes()
	}
	for _, tc := range []struct {
		name, body string
		gzip       bool
		field      string
	}{
		{"a day old", fmt.Sprintf(`{"name":"chat a","start_time_unix_nano":%d}`, now.Add(-25*time.Hour).UnixNano()), false, "start_time_unix_nano"},
		{"two hours long", fmt.Sprintf(`{"name":"chat a","start_time_unix_nano":%d,"end_time_unix_nano":%d}`,
			now.Add(-3*time.Hour).UnixNano(), now.Add(-time.Hour).UnixNano()), false, "end_time_unix_nano"},
		{"invalid UTF-8", fmt.Sprintf(`{"name":"chat `+"\xc3\x28"+`","start_time_unix_nano":%d}`, now.UnixNano()), false, "name"},
		{"invalid UTF-8, gzipped", fmt.Sprintf(`{"name":"chat `+"\xff"+`","start_time_unix_nano":%d}`, now.UnixNano()), true, "name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body, header := []byte(okRecord+"\n"+tc.body), http.Header(nil)
			if tc.gzip {
				body, header = gzipped(string(body)), http.Header{"Content-Encoding": {"gzip"}}
			}
			resp, reply := postIngest(t, url, "application/x-ndjson", body, header)
			assert.Equal(t, http.StatusBadRequest, resp.StatusCode, reply.Error)
			require.NotNil(t, reply.Record)
			assert.Equal(t, 1, *reply.Record)
			assert.Equal(t, tc.field, reply.Field)
		})
	}
	assert.Zero(t, sink.SpanCount(), "all or nothing")
}
