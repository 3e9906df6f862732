module github.com/streamstall/streamstall/internal/llmstream

go 1.26.0

require github.com/stretchr/testify v1.12.1

require go.yaml.in/yaml/v3 v3.0.6 // indirect

require (
	github.com/streamstall/streamstall/internal/semconv v0.1.0
	github.com/streamstall/streamstall/internal/sse v0.1.0
)

replace (
	github.com/streamstall/streamstall/internal/semconv => ../../internal/semconv
	github.com/streamstall/streamstall/internal/sse => ../../internal/sse
)
