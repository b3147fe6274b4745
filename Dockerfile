# syntax=docker/dockerfile:1
#
# One image for every sessionlog process: `sessionlog writer|source|projector|
# repairer|eraser|forker --nats-url ...` in Kubernetes (deploy/k8s), `sessionlog up`
# for a single box, and the SRE verbs.
#
#   docker build -t sessionlog:0.1.0 .

FROM golang:1.26.8 AS build
WORKDIR /src
# Modules first, so source edits do not re-download them.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod \
    go mod download
COPY . .
# Static (Pebble and nats-server are pure Go), reproducible paths, no debug info.
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o /sessionlog ./cmd/sessionlog

# distroless static: CA certificates, tzdata and /etc/passwd, no shell.
# The nonroot user is 65532:65532, as in the manifests' securityContext.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /sessionlog /sessionlog
USER 65532:65532
# 8080: --http-listen in the cluster; 4222: the embedded server of `up`.
EXPOSE 8080 4222
ENTRYPOINT ["/sessionlog"]
