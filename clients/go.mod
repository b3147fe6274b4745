// clients/ holds npm packages, not Go code: this empty module keeps the
// Go code that npm dependencies ship under node_modules out of the
// repository's ./... (go vet, go test and make test would build and test
// it as sessionlog's own).
module github.com/sessionlog/sessionlog/clients

go 1.26
