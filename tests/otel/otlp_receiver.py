"""A real OTLP trace receiver for crates/agentry-server/tests/otel.rs: accepts
`POST /v1/traces` (protobuf `ExportTraceServiceRequest`, from pip `opentelemetry-proto`), or with
`grpc` the collector's gRPC `TraceService/Export` (pip `grpcio`), and appends every span it
receives to a file as one JSON object a line (hex ids, attributes by key, links, the resource's
attributes).

Usage: otlp_receiver.py PORT OUT_FILE [http|grpc]
"""

import gzip
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

OUT = sys.argv[2]
WRITING = threading.Lock()  # one request's spans at a time (requests arrive on threads)


def value(v):
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [value(x) for x in v.array_value.values]
    return getattr(v, kind) if kind else None


def attributes(attrs):
    return {a.key: value(a.value) for a in attrs}


def record(request):
    """Appends the spans of an `ExportTraceServiceRequest` to OUT."""
    with WRITING, open(OUT, "a") as out:
        for rs in request.resource_spans:
            resource = attributes(rs.resource.attributes)
            for ss in rs.scope_spans:
                for s in ss.spans:
                    out.write(json.dumps({
                        "traceId": s.trace_id.hex(),
                        "spanId": s.span_id.hex(),
                        "parentSpanId": s.parent_span_id.hex(),
                        "name": s.name,
                        "kind": s.kind,
                        "attributes": attributes(s.attributes),
                        "links": [{"traceId": l.trace_id.hex(), "spanId": l.span_id.hex()}
                                  for l in s.links],
                        "events": [{"name": e.name, "attributes": attributes(e.attributes)}
                                   for e in s.events],
                        "status": s.status.code,
                        "resource": resource,
                    }) + "\n")


class Receiver(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if self.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        record(request)
        reply = ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, *args):
        pass


def serve_grpc(port):
    from concurrent import futures

    import grpc
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc

    class TraceService(trace_service_pb2_grpc.TraceServiceServicer):
        def Export(self, request, context):
            record(request)
            return ExportTraceServiceResponse()

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(TraceService(), server)
    server.add_insecure_port(f"127.0.0.1:{port}")
    server.start()
    server.wait_for_termination()


if __name__ == "__main__":
    port = int(sys.argv[1])
    if sys.argv[3:] == ["grpc"]:
        serve_grpc(port)
    else:
        ThreadingHTTPServer(("127.0.0.1", port), Receiver).serve_forever()
