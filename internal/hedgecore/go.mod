module github.com/streamstall/streamstall/internal/hedgecore

go 1.26.0

require (
	github.com/DataDog/sketches-go v1.4.8
	github.com/stretchr/testify v1.12.1
	go.uber.org/goleak v1.3.0
)

require (
	go.yaml.in/yaml/v3 v3.0.6 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)

require (
	github.com/jonboulle/clockwork v0.5.0
	github.com/streamstall/streamstall/internal/advice v0.1.0
	github.com/streamstall/streamstall/internal/semconv v0.1.0
)

replace github.com/streamstall/streamstall/internal/semconv => ../../internal/semconv

replace github.com/streamstall/streamstall/internal/advice => ../../internal/advice
