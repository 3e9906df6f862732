module github.com/streamstall/streamstall/internal/sse

go 1.26.0

require github.com/stretchr/testify v1.12.1

require go.yaml.in/yaml/v3 v3.0.6 // indirect
