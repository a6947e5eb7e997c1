#!/bin/bash
# Container HEALTHCHECK: GET /healthz on the address in SLUICE_LISTEN, over bash's
# /dev/tcp so that the runtime image needs no curl. Exit 0 only on an HTTP 200.
set -euo pipefail
listen=${SLUICE_LISTEN:-127.0.0.1:8080}
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
