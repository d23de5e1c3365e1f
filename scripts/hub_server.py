"""A local stand-in for the Hugging Face Hub's download endpoints, serving model directories
from disk, for the tests of `--checkpoint ORG/NAME` and `transformer download` (no network in
CI). It answers what huggingface_hub and this tool ask:

- `GET /api/models/ORG/NAME/revision/REV?blobs=true`: the commit and each file's size, git blob
  id, and for large files (weights, SentencePiece models) their LFS sha256 and size; and
  `GET /api/models/ORG/NAME/tree/REV`, the same as huggingface_hub's `snapshot_download` asks;
- `GET /ORG/NAME/resolve/REV/FILE` (and `HEAD`): the bytes; LFS files through a redirect to
  `/cdn/...` on another host name of the same server (`localhost` for `127.0.0.1`), as the Hub
  sends them to its CDN;
- as the Hub does, 401 with `X-Error-Code: RepoNotFound` for a model it does not have (or a
  private one without its token), 404 with `RevisionNotFound` for an unknown revision.

Faults on request, per model: `--truncate ID` sends the weights' first half and closes,
`--corrupt ID` flips a byte of them (their size right, their hash wrong), `--stall ID` sends
their first bytes and then nothing for a minute, `--trickle ID` sends them a byte every half
second. `--no-hashes ID` lists its files with their names and sizes only (no git blob id, no
LFS sha256), as some mirrors do, the hashes still in each file's answer (`ETag`,
`X-Linked-Etag`); `--no-etags ID` leaves them out of the answers too. Every request is
appended to `--log FILE`.

    python3 scripts/hub_server.py --model org/name=DIR [--private org/name=DIR --token T]
        [--truncate org/name] [--corrupt org/name] [--stall org/name] [--trickle org/name]
        [--no-hashes org/name] [--no-etags org/name] [--log FILE]

Prints `http://127.0.0.1:PORT` on its first line once it listens (port 0: any free port).
"""

import argparse
import hashlib
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LFS_SUFFIXES = (".safetensors", ".bin", ".spm", ".model")
FAULTS = ("truncate", "corrupt", "stall", "trickle", "no-hashes", "no-etags")


class Model:
    def __init__(self, directory, private=False):
        self.files = {}
        for name in sorted(os.listdir(directory)):
            path = os.path.join(directory, name)
            if os.path.isfile(path):
                with open(path, "rb") as f:
                    self.files[name] = f.read()
        listing = "".join(f"{n}:{hashlib.sha1(b).hexdigest()}" for n, b in self.files.items())
        self.commit = hashlib.sha1(listing.encode()).hexdigest()
        self.private = private

    def sibling(self, name):
        data = self.files[name]
        entry = {"rfilename": name, "size": len(data),
                 "blobId": hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()}
        if name.endswith(LFS_SUFFIXES):
            entry["lfs"] = {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data),
                            "pointerSize": 134}
        return entry


def cdn_origin(request):
    """Another host name for the same server, as the Hub's CDN is another host: `localhost`
    for `127.0.0.1` (clients follow a redirect to another host as the Hub's, and never send it
    the token)."""
    host = request.headers.get("Host", "127.0.0.1")
    name, _, port = host.partition(":")
    other = "localhost" if name != "localhost" else "127.0.0.1"
    return f"http://{other}:{port}" if port else f"http://{other}"


def handler(models, faults, token, log):
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def record(self):
            if log:
                with lock, open(log, "a", encoding="utf-8") as f:
                    f.write(f"{self.command} {self.path}\n")

        def send(self, status, body=b"", headers=()):
            self.send_response(status)
            for key, value in headers:
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def model(self, repo):
            model = models.get(repo)
            if model is None or (model.private and self.headers.get("Authorization")
                                 != f"Bearer {token}"):
                self.send(401, b'{"error":"Repository not found"}',
                          [("X-Error-Code", "RepoNotFound"), ("Content-Type", "application/json")])
                return None
            return model

        def do_HEAD(self):
            self.do_GET()

        def do_GET(self):
            self.record()
            path = self.path.split("?")[0]
            parts = path.strip("/").split("/")
            if parts[:2] == ["api", "models"] and len(parts) >= 6 and parts[4] == "revision":
                model = self.model("/".join(parts[2:4]))
                if model is None:
                    return
                revision = "/".join(parts[5:]).replace("%2F", "/")
                if revision not in ("main", model.commit):
                    self.send(404, b'{"error":"Revision not found"}',
                              [("X-Error-Code", "RevisionNotFound")])
                    return
                siblings = [model.sibling(n) for n in model.files]
                if faults.get("/".join(parts[2:4])) in ("no-hashes", "no-etags"):
                    siblings = [{"rfilename": e["rfilename"], "size": e["size"]}
                                for e in siblings]
                body = json.dumps({"id": "/".join(parts[2:4]), "sha": model.commit,
                                   "siblings": siblings})
                self.send(200, body.encode(), [("Content-Type", "application/json")])
            elif parts[:2] == ["api", "models"] and len(parts) >= 6 and parts[4] == "tree":
                # huggingface_hub's snapshot_download lists a revision's files here.
                model = self.model("/".join(parts[2:4]))
                if model is None:
                    return
                tree = []
                for name in model.files:
                    entry = model.sibling(name)
                    item = {"type": "file", "path": name, "size": entry["size"],
                            "oid": entry["blobId"]}
                    if "lfs" in entry:
                        item["lfs"] = {"oid": entry["lfs"]["sha256"], "size": entry["size"],
                                       "pointerSize": 134}
                    tree.append(item)
                self.send(200, json.dumps(tree).encode(), [("Content-Type", "application/json")])
            elif len(parts) >= 5 and parts[2] == "resolve":
                repo = "/".join(parts[:2])
                model = self.model(repo)
                if model is None:
                    return
                name = "/".join(parts[4:])
                if parts[3] not in ("main", model.commit) or name not in model.files:
                    self.send(404, b"Entry not found", [("X-Error-Code", "EntryNotFound")])
                    return
                entry = model.sibling(name)
                headers = [("X-Repo-Commit", model.commit)]
                etags = faults.get(repo) != "no-etags"
                if "lfs" in entry:
                    sha = entry["lfs"]["sha256"]
                    if etags:
                        headers += [("X-Linked-Etag", f'"{sha}"'),
                                    ("X-Linked-Size", str(entry["size"]))]
                    headers.append(("Location", f"{cdn_origin(self)}/cdn/{repo}/{name}"))
                    self.send(302, b"", headers)
                else:
                    if etags:
                        headers.append(("ETag", f'"{entry["blobId"]}"'))
                    self.send(200, model.files[name], headers)
            elif parts[0] == "cdn" and len(parts) >= 4:
                repo, name = "/".join(parts[1:3]), "/".join(parts[3:])
                model = models.get(repo)
                if model is None or name not in model.files:
                    self.send(404, b"no such blob")
                    return
                self.serve_blob(repo, name, model.files[name])
            else:
                self.send(404, b"not a Hub endpoint")

        def serve_blob(self, repo, name, data):
            weights = name in ("model.safetensors", "pytorch_model.bin")
            fault = faults.get(repo) if weights else None
            if fault == "corrupt":
                data = bytes([data[0] ^ 0xFF]) + data[1:]
            if fault == "trickle":
                # A byte every half second: every read answers in time, the whole never ends.
                self.send_response(200)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                for byte in data:
                    self.wfile.write(bytes([byte]))
                    self.wfile.flush()
                    time.sleep(0.5)
                return
            if fault in ("truncate", "stall"):
                # The full length announced, then less: a connection cut, or a server that
                # stops sending.
                self.send_response(200)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data[: len(data) // 2])
                self.wfile.flush()
                if fault == "stall":
                    time.sleep(60)
                self.close_connection = True
                return
            self.send(200, data, [("Content-Type", "application/octet-stream")])

    return Handler


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", action="append", default=[], help="ORG/NAME=DIR")
    parser.add_argument("--private", action="append", default=[], help="ORG/NAME=DIR")
    parser.add_argument("--token", default="secret-token")
    for fault in FAULTS:
        parser.add_argument(f"--{fault}", action="append", default=[], metavar="ORG/NAME")
    parser.add_argument("--log")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    models = {}
    for spec, private in [(m, False) for m in args.model] + [(m, True) for m in args.private]:
        repo, directory = spec.split("=", 1)
        models[repo] = Model(directory, private)
    faults = {repo: fault for fault in FAULTS
              for repo in getattr(args, fault.replace("-", "_"))}
    server = ThreadingHTTPServer(("127.0.0.1", args.port),
                                 handler(models, faults, args.token, args.log))
    server.daemon_threads = True
    print(f"http://127.0.0.1:{server.server_address[1]}", flush=True)
    sys.stdout.close()
    server.serve_forever()


if __name__ == "__main__":
    main()
