#!/bin/bash
# Container HEALTHCHECK: GET /healthz over bash's /dev/tcp, so that the runtime image needs
# no curl. The address is sluice's own: a --listen argument of PID 1 (sluice, started by
# the exec-form ENTRYPOINT) wins over envoyproxy/ratelimit's HOST/PORT (which sluice reads
# when a variable proper to envoyproxy/ratelimit is set too; docs/envoy.md), which win over
# SLUICE_LISTEN, as they do in sluice. Exit 0 only on an HTTP 200.
set -euo pipefail
listen=${SLUICE_LISTEN:-127.0.0.1:8080}
if [[ -n ${PORT:-}${HOST:-} && -n ${RUNTIME_ROOT:-}${RUNTIME_SUBDIRECTORY:-}${RUNTIME_APPDIRECTORY:-}${REDIS_URL:-}${REDIS_SOCKET_TYPE:-}${GRPC_PORT:-}${GRPC_HOST:-}${GRPC_UDS:-} ]]; then
  listen=${HOST:-0.0.0.0}:${PORT:-8080}
fi
if [[ -r /proc/1/cmdline ]]; then
  mapfile -d '' -t args </proc/1/cmdline
  for ((i = 0; i < ${#args[@]}; i++)); do
    case ${args[i]} in
      --listen=*) listen=${args[i]#--listen=} ;;
      --listen) listen=${args[i + 1]:-$listen} ;;
    esac
  done
fi
port=${listen##*:}
host=${listen%:*}
host=${host#[}
host=${host%]}
case $host in
  "" | 0.0.0.0) host=127.0.0.1 ;;
  ::) host=::1 ;;
esac
exec 3<>"/dev/tcp/$host/$port"
printf 'GET /healthz HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n' "$host" >&3
IFS= read -r -t 2 status_line <&3
[[ $status_line == "HTTP/1.1 200"* ]]
