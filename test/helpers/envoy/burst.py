# An independent client of the service (Debian's python3-grpcio, stubs made by grpc_tools from the
# service's own .proto files): fires bursts of concurrent ShouldRateLimit calls for one descriptor and
# prints, per burst (one after the other), a JSON line counting the answers by status (OK, OVER_LIMIT, or the gRPC error).
# Usage: burst.py <proto dir> <host:port> <domain> <key> <value> <burst size>...
import collections
import json
import os
import sys
import tempfile
import threading

import grpc
from grpc_tools import protoc

proto_dir, target, domain, key, value = sys.argv[1:6]
sizes = [int(size) for size in sys.argv[6:]]

out = tempfile.mkdtemp(prefix='sluice-stubs-')
protos = [os.path.relpath(os.path.join(root, name), proto_dir)
          for root, _, names in os.walk(proto_dir) for name in names if name.endswith('.proto')]
include = os.path.join(os.path.dirname(protoc.__file__), '_proto')
if protoc.main(['protoc', f'-I{proto_dir}', f'-I{include}', f'--python_out={out}', f'--grpc_python_out={out}', *protos]) != 0:
    sys.exit('protoc failed')
sys.path.insert(0, out)
from envoy.extensions.common.ratelimit.v3 import ratelimit_pb2  # noqa: E402
from envoy.service.ratelimit.v3 import rls_pb2, rls_pb2_grpc  # noqa: E402

channel = grpc.insecure_channel(target)
grpc.channel_ready_future(channel).result(timeout=30)
stub = rls_pb2_grpc.RateLimitServiceStub(channel)

for round_number, size in enumerate(sizes):
    # Each burst has a descriptor value of its own (<value>-<burst>), so each starts from an empty window.
    entry = ratelimit_pb2.RateLimitDescriptor.Entry(key=key, value=f'{value}-{round_number}')
    descriptor = ratelimit_pb2.RateLimitDescriptor(entries=[entry])
    request = rls_pb2.RateLimitRequest(domain=domain, descriptors=[descriptor])
    counts = collections.Counter()
    lock = threading.Lock()
    done = threading.Event()
    left = [size]

    def answered(future, counts=counts, lock=lock, done=done, left=left):
        try:
            name = rls_pb2.RateLimitResponse.Code.Name(future.result().overall_code)
        except grpc.RpcError as error:
            name = error.code().name
            # The service's own refusals say it is overloaded. A RESOURCE_EXHAUSTED without that came from the
            # transport (gRPC reads an HTTP/2 reset with ENHANCE_YOUR_CALM as one): counted apart, with its details.
            if name == 'RESOURCE_EXHAUSTED' and 'overloaded' not in (error.details() or ''):
                name = f'RESOURCE_EXHAUSTED, not the service: {error.details()}'
        with lock:
            counts[name] += 1
            left[0] -= 1
            if left[0] == 0:
                done.set()

    # Every call of the burst is in flight before the first answer is read.
    for _ in range(size):
        stub.ShouldRateLimit.future(request, timeout=30).add_done_callback(answered)
    if not done.wait(120):
        sys.exit(f'burst {round_number}: {left[0]} of {size} calls unanswered')
    print(json.dumps(dict(counts)), flush=True)
