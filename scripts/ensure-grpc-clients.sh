#!/usr/bin/env bash
# Installs the independent clients the service's burst tests drive it with, when missing: Debian's
# python3-grpcio (with grpc_tools, which makes the stubs from the service's own .proto files).
set -euo pipefail
need=()
/usr/bin/python3 -c 'import grpc' >/dev/null 2>&1 || need+=(python3-grpcio)
/usr/bin/python3 -c 'import grpc_tools.protoc' >/dev/null 2>&1 || need+=(python3-grpc-tools)
[ ${#need[@]} -eq 0 ] && exit 0
"$(dirname "$0")/apt-install.sh" "an independent gRPC client for the service's burst tests" "${need[@]}"
