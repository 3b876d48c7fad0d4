# The router image: a static binary on distroless, running as non-root.
# Build from the repository root: docker build -f build/router.Dockerfile -t regionwarden/router .
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/router ./cmd/router

FROM gcr.io/distroless/static:nonroot
COPY --from=build /out/router /router
USER 65532:65532
ENTRYPOINT ["/router"]
