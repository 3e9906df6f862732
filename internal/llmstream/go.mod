module github.com/streamstall/streamstall/internal/llmstream

go 1.26.0

require github.com/stretchr/testify v1.12.1

require (
	github.com/aws/aws-sdk-go-v2/internal/configsources v1.5.12 // indirect
	github.com/aws/aws-sdk-go-v2/internal/endpoints/v2 v2.8.12 // indirect
	go.yaml.in/yaml/v3 v3.0.6 // indirect
)

require (
	github.com/aws/aws-sdk-go-v2 v1.48.0
	github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream v1.7.27
	github.com/aws/aws-sdk-go-v2/service/bedrockruntime v1.63.13
	github.com/aws/smithy-go v1.28.9
	github.com/streamstall/streamstall/internal/semconv v0.1.0
	github.com/streamstall/streamstall/internal/sse v0.1.0
)

replace (
	github.com/streamstall/streamstall/internal/semconv => ../../internal/semconv
	github.com/streamstall/streamstall/internal/sse => ../../internal/sse
)
