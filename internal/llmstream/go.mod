module github.com/streamstall/streamstall/internal/llmstream

go 1.26.0

require github.com/stretchr/testify v1.12.1

require go.yaml.in/yaml/v3 v3.0.6 // indirect

require (
	github.com/streamstall/streamstall/internal/semconv v0.0.0-00010101000000-000000000000
	github.com/streamstall/streamstall/internal/sse v0.0.0-00010101000000-000000000000
)

replace (
	github.com/streamstall/streamstall/internal/semconv => ../../internal/semconv
	github.com/streamstall/streamstall/internal/sse => ../../internal/sse
)
