// Package llmstream holds streamstall's one definition of what a content
// chunk is (docs/contract.md section 3), for each streaming API shape it understands, and
// the metadata (ids, model, finish reasons, usage, errors) those streams carry.
// The sse_capture proxy and the hedging client both classify frames here, so
// they can never disagree on what counts.
package llmstream

import "strings"

// Shape is the API a request or a stream speaks.
type Shape uint8

const (
	ShapeUnknown Shape = iota
	// ShapeChatCompletions is OpenAI's /v1/chat/completions (and compatibles).
	ShapeChatCompletions
	// ShapeCompletions is OpenAI's legacy /v1/completions.
	ShapeCompletions
	// ShapeResponses is OpenAI's /v1/responses.
	ShapeResponses
	// ShapeMessages is Anthropic's /v1/messages.
	ShapeMessages
)

// ShapeFromPath detects the API shape from a request path. Suffixes are
// matched so that gateways mounting the API under a prefix
// ("/openai/v1/chat/completions") are understood too; Anthropic's path keeps
// its "/v1" so that other APIs' ".../messages" collections are not mistaken
// for it.
func ShapeFromPath(path string) Shape {
	path = strings.TrimRight(path, "/")
	switch {
	case strings.HasSuffix(path, "/chat/completions"):
		return ShapeChatCompletions
	case strings.HasSuffix(path, "/completions"):
		return ShapeCompletions
	case strings.HasSuffix(path, "/responses"):
		return ShapeResponses
	case strings.HasSuffix(path, "/v1/messages"):
		return ShapeMessages
	}
	return ShapeUnknown
}

// Operation returns the gen_ai.operation.name of the shape, as the GenAI
// semantic conventions name it: the Responses and Messages APIs are chat
// operations, the legacy completions API is text_completion.
func (s Shape) Operation() string {
	switch s {
	case ShapeChatCompletions, ShapeResponses, ShapeMessages:
		return "chat"
	case ShapeCompletions:
		return "text_completion"
	}
	return ""
}

// Provider returns the gen_ai.provider.name the shape implies when nothing
// better is configured: the vendor that defined the API.
func (s Shape) Provider() string {
	switch s {
	case ShapeChatCompletions, ShapeCompletions, ShapeResponses:
		return "openai"
	case ShapeMessages:
		return "anthropic"
	}
	return ""
}

func (s Shape) String() string {
	switch s {
	case ShapeChatCompletions:
		return "chat_completions"
	case ShapeCompletions:
		return "completions"
	case ShapeResponses:
		return "responses"
	case ShapeMessages:
		return "messages"
	}
	return "unknown"
}
