# clouddb's image: the static binary on the official redis image, whose redis-server
# clouddb needs beside it with --driver kubernetes (an import's files are loaded into a
# throwaway redis-server of clouddb's own pod, which checks and measures them, before the
# database is filled). Keep its Redis version that of the newest --k8s-redis-image (7.0
# by default): a server reads the files of its own version and older ones.
#
#   docker build -t clouddb:dev .
#
# deploy/kubernetes/clouddb.yaml runs it. driver/kubernetes's TestDeploy builds the same
# image without docker (the binary, this machine's redis-server and its libraries).
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X clouddb.version=${VERSION}" -o /out/clouddb ./cmd/clouddb

FROM redis:7.0.15
COPY --from=build /out/clouddb /usr/local/bin/clouddb
# The image's redis user; the manifest runs it with a read-only root filesystem and
# writable volumes at /var/lib/clouddb and /tmp.
USER 999:999
WORKDIR /var/lib/clouddb
ENTRYPOINT ["clouddb"]
CMD ["serve", "--listen", "0.0.0.0:8080", "--data-dir", "/var/lib/clouddb"]
