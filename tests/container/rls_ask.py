"""Asks a running Sluice for decisions over gRPC (Envoy's Rate Limit Service v3) and prints
one word per answer: OK or OVER_LIMIT. Also `--health`: the gRPC health service's answer.

Usage: /usr/bin/python3 tests/container/rls_ask.py HOST:PORT DOMAIN KEY=VALUE[,KEY=VALUE...] [COUNT]
       /usr/bin/python3 tests/container/rls_ask.py HOST:PORT --health
Stubs come from tests/grpc/rls_support.py (protoc over proto/, at run time).
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "grpc"))

import grpc  # noqa: E402

import rls_support  # noqa: E402


def main(argv):
    if len(argv) < 3:
        sys.exit(__doc__)
    target = argv[1]
    channel = grpc.insecure_channel(target)
    if argv[2] == "--health":
        stub = rls_support.health_pb2_grpc.HealthStub(channel)
        answer = stub.Check(rls_support.health_pb2.HealthCheckRequest(), timeout=5)
        print(rls_support.health_pb2.HealthCheckResponse.ServingStatus.Name(answer.status))
        return
    domain = argv[2]
    entries = [tuple(pair.split("=", 1)) for pair in argv[3].split(",")]
    count = int(argv[4]) if len(argv) > 4 else 1
    stub = rls_support.rls_pb2_grpc.RateLimitServiceStub(channel)
    for _ in range(count):
        answer = stub.ShouldRateLimit(rls_support.request(domain, [entries]), timeout=5)
        print(rls_support.Code.Code.Name(answer.overall_code))


if __name__ == "__main__":
    main(sys.argv)
