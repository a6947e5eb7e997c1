# shellcheck shell=bash
# Sourced by bench/grpc.sh, bench/grpc_callgrind.sh and bench/grpc_wakeups.sh (from the
# repository's root, with $work a scratch directory): free_port, and the request bodies they
# send with h2load, written into $work:
#   grpc.bin     Envoy's RateLimitRequest (domain bench, op=fixed_window_allow) behind gRPC's
#                5-byte frame prefix (uncompressed flag, big-endian length)
#   health.grpc  grpc.health.v1 HealthCheckRequest for "ratelimit", framed the same way
#   http.json    the same decision as /shouldAllowRequest's JSON body
# and grpc_call, the header fields of a gRPC call (h2load -H arguments).

# shellcheck disable=SC2154  # $work is the sourcing script's
: "${work:?bench/grpc_bodies.sh needs \$work, a scratch directory}"

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

grpc_frame() {  # <message file> <framed file>: the 5-byte gRPC prefix, then the message
  python3 - "$1" "$2" <<'PY'
import struct, sys
message = open(sys.argv[1], "rb").read()
open(sys.argv[2], "wb").write(b"\x00" + struct.pack(">I", len(message)) + message)
PY
}

printf 'domain: "bench"\ndescriptors { entries { key: "op" value: "fixed_window_allow" } }\n' |
  protoc -I proto -I /usr/include --encode=envoy.service.ratelimit.v3.RateLimitRequest \
    envoy/service/ratelimit/v3/rls.proto >"$work/message.bin"
grpc_frame "$work/message.bin" "$work/grpc.bin"
printf 'service: "ratelimit"\n' |
  protoc -I tests/grpc/proto --encode=grpc.health.v1.HealthCheckRequest \
    grpc_health/v1/health.proto >"$work/health.bin"
grpc_frame "$work/health.bin" "$work/health.grpc"
printf '{"domain":"bench","descriptors":[{"entries":[{"key":"op","value":"fixed_window_allow"}]}]}' \
  >"$work/http.json"
# shellcheck disable=SC2034  # used by the scripts that source this file
grpc_call=(-H 'content-type: application/grpc' -H 'te: trailers')
