"""A small OTLP/HTTP receiver for Satchel's tests: decodes what an
exporter posts to /v1/traces and /v1/metrics (protobuf with the
`opentelemetry-proto` package from PyPI, or OTLP JSON) and writes each
span and metric data point as one JSON line to the file given, so a test
can read what a collector would have received.

Usage: python otlp_receiver.py PORT_FILE OUT.jsonl
Listens on 127.0.0.1 on a free port, which it writes to PORT_FILE.
"""

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from google.protobuf.json_format import MessageToDict
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

LOCK = threading.Lock()
KINDS = {1: "SPAN_KIND_INTERNAL", 2: "SPAN_KIND_SERVER", 3: "SPAN_KIND_CLIENT",
         4: "SPAN_KIND_PRODUCER", 5: "SPAN_KIND_CONSUMER"}
OUT = None


def value(v):
    """An OTLP AnyValue (as JSON) in plain form."""
    for key in ("stringValue", "boolValue", "doubleValue"):
        if key in v:
            return v[key]
    if "intValue" in v:
        return int(v["intValue"])
    if "arrayValue" in v:
        return [value(x) for x in v["arrayValue"].get("values", [])]
    return None


def attributes(items):
    return {a["key"]: value(a.get("value", {})) for a in items or []}


def hex_id(raw):
    """Protobuf JSON gives ids in base64, OTLP JSON in hex."""
    import base64

    if not raw:
        return ""
    if len(raw) in (16, 32) and all(c in "0123456789abcdefABCDEF" for c in raw):
        return raw.lower()
    return base64.b64decode(raw).hex()


def write(record):
    with LOCK:
        OUT.write(json.dumps(record) + "\n")
        OUT.flush()


def spans(body):
    for rs in body.get("resourceSpans", []):
        resource = attributes(rs.get("resource", {}).get("attributes"))
        for ss in rs.get("scopeSpans", []):
            for s in ss.get("spans", []):
                write(
                    {
                        "type": "span",
                        "service": resource.get("service.name"),
                        "scope": ss.get("scope", {}).get("name"),
                        "name": s.get("name"),
                        "kind": KINDS.get(s.get("kind"), s.get("kind")),
                        "trace_id": hex_id(s.get("traceId")),
                        "span_id": hex_id(s.get("spanId")),
                        "parent_span_id": hex_id(s.get("parentSpanId")),
                        "attributes": attributes(s.get("attributes")),
                        "status": s.get("status", {}),
                    }
                )


def metrics(body):
    for rm in body.get("resourceMetrics", []):
        for sm in rm.get("scopeMetrics", []):
            for m in sm.get("metrics", []):
                for kind in ("histogram", "sum", "gauge"):
                    for p in m.get(kind, {}).get("dataPoints", []):
                        write(
                            {
                                "type": "metric",
                                "name": m.get("name"),
                                "unit": m.get("unit"),
                                "kind": kind,
                                "attributes": attributes(p.get("attributes")),
                                "count": int(p.get("count", 0)),
                                "sum": p.get("sum", p.get("asInt", p.get("asDouble"))),
                            }
                        )


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        data = self.rfile.read(int(self.headers.get("content-length", 0)))
        json_body = "json" in (self.headers.get("content-type") or "")
        if self.path == "/v1/traces":
            if json_body:
                body = json.loads(data)
            else:
                request = trace_service_pb2.ExportTraceServiceRequest()
                request.ParseFromString(data)
                body = MessageToDict(request)
            spans(body)
        elif self.path == "/v1/metrics":
            if json_body:
                body = json.loads(data)
            else:
                request = metrics_service_pb2.ExportMetricsServiceRequest()
                request.ParseFromString(data)
                body = MessageToDict(request)
            metrics(body)
        else:
            self.send_response(404)
            self.end_headers()
            return
        write({"type": "request", "path": self.path, "json": json_body,
               "headers": {k.lower(): v for k, v in self.headers.items()}})
        self.send_response(200)
        self.send_header("content-type", "application/json" if json_body else "application/x-protobuf")
        self.end_headers()
        self.wfile.write(b"{}" if json_body else b"")

    def log_message(self, *args):
        pass


def main():
    global OUT
    port_file, out_path = sys.argv[1], sys.argv[2]
    OUT = open(out_path, "a")
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    with open(port_file + ".tmp", "w") as f:
        f.write(str(server.server_address[1]))
    import os

    os.replace(port_file + ".tmp", port_file)
    server.serve_forever()


if __name__ == "__main__":
    main()
