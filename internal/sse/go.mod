module github.com/streamstall/streamstall/internal/sse

go 1.26.0

require (
	github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream v1.7.27
	github.com/stretchr/testify v1.12.1
)

require (
	github.com/aws/smithy-go v1.28.9 // indirect
	go.yaml.in/yaml/v3 v3.0.6 // indirect
)
