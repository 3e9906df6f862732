module github.com/streamstall/streamstall/hedge

go 1.26.0

require (
	github.com/DataDog/sketches-go v1.4.8 // indirect
	github.com/jonboulle/clockwork v0.5.0
	github.com/openai/openai-go/v3 v3.99.0
	github.com/stretchr/testify v1.12.1
	go.opentelemetry.io/otel v1.47.0
	go.opentelemetry.io/otel/metric v1.47.0 // indirect
	go.opentelemetry.io/otel/sdk v1.47.0
	go.opentelemetry.io/otel/trace v1.47.0
	go.uber.org/goleak v1.3.0
	golang.org/x/sys v0.49.0 // indirect
)

require (
	github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream v1.7.27 // indirect
	github.com/aws/smithy-go v1.28.9 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/coder/websocket v1.8.15 // indirect
	github.com/go-logr/logr v1.4.4 // indirect
	github.com/go-logr/stdr v1.2.2 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/tidwall/gjson v1.20.0 // indirect
	github.com/tidwall/match v1.1.1 // indirect
	github.com/tidwall/pretty v1.2.1 // indirect
	github.com/tidwall/sjson v1.2.5 // indirect
	go.opentelemetry.io/auto/sdk v1.2.1 // indirect
	go.opentelemetry.io/otel/log v1.47.0 // indirect
	go.yaml.in/yaml/v3 v3.0.6 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)

require (
	github.com/streamstall/streamstall/internal/advice v0.1.0
	github.com/streamstall/streamstall/internal/hedgecore v0.1.0
	github.com/streamstall/streamstall/internal/llmstream v0.1.0
	github.com/streamstall/streamstall/internal/semconv v0.1.0
	github.com/streamstall/streamstall/internal/sse v0.1.0
	github.com/streamstall/streamstall/internal/testbed/fakellm v0.1.0
)

replace (
	github.com/streamstall/streamstall/internal/advice => ../internal/advice
	github.com/streamstall/streamstall/internal/hedgecore => ../internal/hedgecore
	github.com/streamstall/streamstall/internal/llmstream => ../internal/llmstream
	github.com/streamstall/streamstall/internal/semconv => ../internal/semconv
	github.com/streamstall/streamstall/internal/sse => ../internal/sse
	github.com/streamstall/streamstall/internal/testbed/fakellm => ../internal/testbed/fakellm
)
