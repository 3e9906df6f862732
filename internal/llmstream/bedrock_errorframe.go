// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package llmstream

import (
	"bytes"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
)

// Bedrock's stream exceptions that a proxy ending a call itself sends: both
// ConverseStream and InvokeModelWithResponseStream declare them, so the
// SDKs raise them as their typed errors on either.
const (
	// bedrockStreamError is for a stream ended mid-way (a stall, a late
	// first token): ModelStreamErrorException, which carries the original
	// status and message.
	bedrockStreamError = "modelStreamErrorException"
	// bedrockUnavailable is for a proxy shutting down: the service cannot
	// take the call now (ServiceUnavailableException).
	bedrockUnavailable = "serviceUnavailableException"
)

// bedrockException is the payload of Bedrock's stream exceptions; only
// modelStreamErrorException has the original status and message.
type bedrockException struct {
	Message            string `json:"message"`
	OriginalStatusCode int    `json:"originalStatusCode,omitempty"`
	OriginalMessage    string `json:"originalMessage,omitempty"`
}

// BedrockErrorFrame returns the AWS event stream message that ends a Bedrock
// stream (ConverseStream or InvokeModelWithResponseStream) with an error: an
// exception message (":message-type" exception) that aws-sdk-go-v2's
// bedrockruntime stream reader returns from Err() as its typed error, a
// *types.ServiceUnavailableException for status 503 (a shutdown), else a
// *types.ModelStreamErrorException whose OriginalStatusCode is status and
// OriginalMessage code (ttft_timeout, stall_timeout). The message is binary
// framed: it must be written at a message boundary of the stream, never
// after a partial message.
func BedrockErrorFrame(status int, code, message string) []byte {
	typ := bedrockStreamError
	payload := bedrockException{Message: message, OriginalStatusCode: status, OriginalMessage: code}
	if status == http.StatusServiceUnavailable {
		typ, payload = bedrockUnavailable, bedrockException{Message: message}
	}
	var h eventstream.Headers
	h.Set(":message-type", eventstream.StringValue("exception"))
	h.Set(":exception-type", eventstream.StringValue(typ))
	h.Set(":content-type", eventstream.StringValue("application/json"))
	var b bytes.Buffer
	// Writing to a bytes.Buffer cannot fail, and the headers are well under
	// the encoder's limits.
	_ = eventstream.NewEncoder().Encode(&b, eventstream.Message{Headers: h, Payload: marshal(payload)})
	return b.Bytes()
}
