# The sluice image: one static binary on an empty base.
#
#   docker build -t sluice --build-arg VERSION=v1.2.3 --build-arg REVISION=$(git rev-parse HEAD) .
#
# Without a container daemon, `make image` writes the same image as an OCI
# layout and a `docker load` tarball (deploy/image, no daemon, no network
# beyond the Go module proxy). Both give: the binary at /usr/local/bin/sluice
# (CGO off, the time zone database embedded), CA certificates at
# /etc/ssl/certs/ca-certificates.crt, the user sluice (65532:65532), no shell,
# and /bin/ratelimit, a link to the binary that serves when invoked by that
# name (Envoy Gateway's Deployment runs it).

ARG GO_VERSION=1.26

FROM golang:${GO_VERSION} AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=devel
ENV CGO_ENABLED=0
RUN go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/usr/local/bin/sluice ./cmd/sluice \
 && mkdir -p /out/etc/ssl/certs \
 && cp /etc/ssl/certs/ca-certificates.crt /out/etc/ssl/certs/ \
 && echo 'sluice:x:65532:65532:sluice:/nonexistent:/sbin/nologin' > /out/etc/passwd \
 && echo 'sluice:x:65532:' > /out/etc/group \
 && mkdir -p /out/bin && ln -s /usr/local/bin/sluice /out/bin/ratelimit

FROM scratch
ARG VERSION=devel
ARG REVISION=unknown
LABEL org.opencontainers.image.source="https://github.com/sluicehq/sluice" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.title="sluice"
COPY --from=build /out/ /
ENV PATH=/usr/local/bin
# Numeric, so that Kubernetes' runAsNonRoot can check it.
USER 65532:65532
EXPOSE 8080 8081
ENTRYPOINT ["/usr/local/bin/sluice"]
CMD ["serve"]
