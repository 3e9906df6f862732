module github.com/streamstall/streamstall/internal/semconv

go 1.26.0
