package hedge_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/streamstall/streamstall/hedge"
	"github.com/streamstall/streamstall/internal/fakellm"
)

// A primary that takes 5 s to say anything loses to the hedge started after
// 100 ms; its connection is closed as soon as the hedge delivers.
func ExampleHedger_Stream() {
	srv, _ := fakellm.New(fakellm.Config{})
	ts := httptest.NewServer(srv)
	defer ts.Close()
	endpoint := func(name, script string) hedge.Endpoint {
		return hedge.Endpoint{Name: name, BaseURL: ts.URL + "/v1", Model: "gpt-x",
			Header: http.Header{fakellm.HeaderScript: {script}}}
	}
	h, err := hedge.New([]hedge.Source{
		hedge.NewOpenAIChatSource(endpoint("slow", `{"ttft_ms": 5000}`)),
		hedge.NewAnthropicSource(endpoint("fast", `{"ttft_ms": 10, "gaps_ms": [5, 5]}`)),
	}, hedge.Delay(100*time.Millisecond), hedge.StallTimeout(30*time.Second))
	if err != nil {
		panic(err)
	}
	call, err := h.Stream(context.Background(), hedge.Request{Messages: []hedge.Message{{Role: "user", Content: "Hi"}}})
	if err != nil {
		panic(err)
	}
	defer call.Close()
	chunks := 0
	for call.Next() {
		chunks++ // call.Chunk().Text goes to the user as it comes
	}
	var stall *hedge.StallError
	if errors.As(call.Err(), &stall) {
		fmt.Println("stalled after", stall.Chunks, "chunks; retry")
		return
	}
	res := call.Result()
	fmt.Println(res.Source, res.Attempts, chunks)
	// Output: fast 2 3
}
